import sys, json, os, cupy as cp, gemmlab
from gemmlab.runner import Problem, Shape, cublas_gemm
dims = [int(x) for x in sys.argv[1].split("x")]; n = dims[0]; dtype = sys.argv[2] if len(sys.argv) > 2 else "bf16"
configs = json.loads(os.environ.get("XCONFIGS", "[]"))  # [(variant, overrides)]
p = Problem(Shape(*dims) if len(dims) == 3 else Shape(n, n, int(os.environ.get("KDIM", n))), dtype=dtype)  # 4096, or MxNxK
cat = gemmlab.catalog(tuple(os.environ.get("KDIRS", "").split(":")) if os.environ.get("KDIRS") else ())
for name, over in configs:
    v = cat.get(name)
    params = v.resolve(v.for_dtype(dtype, over))
    c = gemmlab.build(v, params)
    for _ in range(int(os.environ.get("NLAUNCH", 2))):
        r = p.run(v, params, c, timed=False)
        print(name, over, r.status, flush=True)
for _ in range(int(os.environ.get("NLAUNCH", 2))):
    cublas_gemm(p.A, p.B, p.C, dtype)
cp.cuda.Device().synchronize()
