// Empty: the emulator's shim.h (included first) has the few types and functions a kernel uses from this header.
#pragma once
