"""One exception type for everything a user can get wrong or lack.

The CLI prints a GemmlabError as one clear message and exits non-zero, without a traceback.
Anything else that escapes is a bug in gemmlab.
"""


class GemmlabError(Exception):
    """A problem the user can act on: bad input, missing GPU, a template that does not compile."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n{self.hint}"
