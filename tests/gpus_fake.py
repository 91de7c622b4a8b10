"""A stand-in GPU worker that says which GPU it was given: each request is logged with the worker's
CUDA_VISIBLE_DEVICES (for tests/test_gpus.py)."""

import os
import time

from handlers import FakeGpu


class SeenGpu(FakeGpu):
    def handle(self, request):
        if request[0] not in ("cublas", "run"):  # the suite's bandwidth
            return super().handle(request)
        name = "cuBLAS" if request[0] == "cublas" else request[1].compiled.rendered.variant.name
        with open(os.environ["SEEN_GPU_LOG"], "a") as log:
            log.write(f"{name} {os.environ.get('CUDA_VISIBLE_DEVICES')}\n")
        time.sleep(0.2)  # long enough that the other GPU takes the next job
        return super().handle(request)


class NoSecondGpu(SeenGpu):
    """As SeenGpu, but the worker on the second GPU cannot start (as one without room for the inputs)."""

    def __init__(self, *args, **kwargs):
        from gemmlab.errors import GemmlabError
        if os.environ.get("CUDA_VISIBLE_DEVICES") == "1":
            raise GemmlabError("GPU 1 has no room for the inputs")
        super().__init__(*args, **kwargs)
