#!/usr/bin/env bash
# Regenerate the H100 results that README.md and docs/ cite, with gemmlab's own commands only.
#
#     benchmarks/regenerate.sh WHAT DIR [PREFIX]
#
# writes PREFIX-*.json (PREFIX defaults to h100) into DIR, a directory of new files: gemmlab's --out never
# overwrites one, and a committed result is replaced only by moving the new file over it on purpose.
# WHAT is one of the groups below, or all; benchmarks/README.md says which file each writes and which
# table it feeds. GEMMLAB=echo prints the commands instead of running them; SIZES="1024 4096" runs the
# ladder at those sizes only.
set -euo pipefail
what=${1:?usage: benchmarks/regenerate.sh ladder|tensor|versus|outdtype|sweeps|suite|anyshape|tune|scaling|occupancy|profile|faults|dist|problems|fp8|fp8holdout|fp8transpose|pcie|refs|all DIR [PREFIX]}
dir=${2:?usage: benchmarks/regenerate.sh WHAT DIR [PREFIX]}
p=${3:-h100}
dir=$(mkdir -p "$dir" && cd "$dir" && pwd)  # (before the cd below: DIR is relative to where you are)
cd "$(dirname "$0")/.."
read -r -a gemmlab <<< "${GEMMLAB:-python3 -m gemmlab}"
g() { "${gemmlab[@]}" "$@"; }
# A failed row (CRASHED, FAIL) makes gemmlab exit 1 with everything else written: go on to the next file.
keep() { g "$@" || echo "regenerate.sh: exit status $? from: gemmlab $*" >&2; }

ladder() {  # the FP32 ladder and cuBLAS at five sizes, 3 rounds taken in turn (the README's ladder and head-to-head tables)
    for s in ${SIZES:-1024 2048 3072 4096 8192}; do keep compare --rounds 3 --size "$s" --out "$dir/$p-compare-$s.json"; done
}

tensor() {  # the tensor-core ladder, 5 rounds taken in turn with cuBLAS (docs/ladder.md)
    for s in 4096 8192; do
        for t in bf16 fp16; do
            v=wmma,mma,wgmma,wgmma_ws,wgmma_pingpong
            [ "$s" = 8192 ] && v=mma,wgmma,wgmma_ws,wgmma_pingpong  # wmma takes 10 s a run there
            keep compare --rounds 5 --dtype "$t" --variants "$v" --size "$s" --out "$dir/$p-tensor-$t-$s.json"
        done
    done
    keep compare --rounds 5 --dtype tf32 --variants wmma,mma,wgmma_tf32 --size 4096 --out "$dir/$p-tensor-tf32-4096.json"
}

versus() {  # the speed goals: the best rung alone with cuBLAS, 20 rounds taken in turn (the README)
    for s in 4096 8192; do
        for t in bf16 fp16; do
            keep compare --rounds 20 --dtype "$t" --variants wgmma_ws --size "$s" --out "$dir/$p-versus-$t-$s.json"
        done
    done
    keep compare --rounds 20 --dtype tf32 --variants wgmma_tf32 --size 4096 --out "$dir/$p-versus-tf32-4096.json"
}

outdtype() {  # C in fp32 and in bf16 (--out-dtype), wgmma_ws beside cuBLAS writing the same C, 5 rounds taken in turn
    for s in 4096 8192; do
        for o in fp32 bf16; do
            keep compare --rounds 5 --dtype bf16 --out-dtype "$o" --variants wgmma_ws --size "$s" --out "$dir/$p-outdtype-bf16-$s-$o.json"
        done
    done
}

sweeps() {  # the suite's small shapes: the sweeps whose winners (--save-best) kernels/tuning.json ships
    local d="$dir/$p-sweep-split"
    mkdir -p "$d"
    for M in 1 16 32 64; do
        BM=$([ "$M" -lt 32 ] && echo "$M" || echo 16,32)
        EF=$([ "$M" -lt 32 ] && echo false,true || echo false)  # the L2 hint, where one block row reads B once
        keep sweep --variant skinny_async -M "$M" -N 3072 -K 3072 --param BM=$BM --param WARPS=2,4 --param ROWS=8,16 \
            --param STAGES=2,3,4 --param SPLIT_K=4,8,16,32,64 --param EVICT_FIRST=$EF --save-best --fresh \
            --out "$d/skinny_async-${M}x3072x3072.json"
    done
    keep sweep --variant skinny_narrow -M 1 -N 3072 -K 3072 --param COLS=16,32,64 --param WARPS=4,8,16 --param ROWS=8,16 \
        --param STAGES=2,3,4 --param EVICT_FIRST=false,true --save-best --fresh --out "$d/skinny_narrow-1x3072x3072.json"
    keep sweep --variant pipelined -M 128 -N 128 -K 32768 --param BM=64,128 --param BN=64,128 --param WM=32,64 \
        --param WN=32,64 --param TM=4,8,16 --param TN=4,8 --param SPLIT_K=32,64,128 --save-best --fresh \
        --out "$d/pipelined-128x128x32768.json"
    for K in 256 1024 8192; do
        keep sweep --variant pipelined -M 256 -N 256 -K "$K" --param BM=64 --param BN=64,128 --param WM=32 --param WN=32,64 \
            --param TM=4,8 --param TN=4,8 --param STAGES=3,4 --param SPLIT_K=2,4,8,16,32,64 --save-best --fresh \
            --out "$d/pipelined-256x256x$K.json"
    done
    local med=(--param BM=64 --param BN=128 --param WM=32 --param WN=64 --param TM=8 --param TN=8 --param STAGES=3)
    for M in 512 256 128 64; do
        keep sweep --variant spread -M "$M" -N 3072 -K 3072 "${med[@]}" --param BK=16,32 --param UNROLL=4,8 \
            --param SPLIT_K=2,4,8,16,32 --save-best --fresh --out "$d/spread-${M}x3072x3072.json"
    done
    keep sweep --variant spread -M 256 -N 256 -K 8192 --param BM=64 --param BN=64,128 --param WM=32 --param WN=32,64 \
        --param TM=4,8 --param TN=8 --param BK=16,32 --param STAGES=3 --param SPLIT_K=16,32,64 --save-best --fresh \
        --out "$d/spread-256x256x8192.json"
}

suite() {  # the lab's 12 shapes with auto (the shipped tuning table) and cuBLAS, on the roofline (docs/journal.md)
    keep suite --rounds 3 --out "$dir/$p-suite.json" --plot "$dir/$p-roofline.png"
}

anyshape() {  # auto against cuBLAS on shapes nobody tuned for: 40 drawn at random (a seed drawn now, kept in
    # the file) in FP32 and BF16, and Llama-3's projections in BF16 (docs/journal.md, "Any shape, any type")
    for t in fp32 bf16; do keep suite --random 40 --dtype "$t" --rounds 3 --out "$dir/$p-random-$t.json"; done
    keep suite --shapes llm --dtype bf16 --rounds 3 --out "$dir/$p-llm-bf16.json"
}

tune() {  # the sweeps that chose the rungs' defaults (docs/ladder.md, docs/journal.md)
    local s=(--size 4096 --fresh)
    keep sweep --variant tiled "${s[@]}" --param TILE=8,16,32 --param PREFETCH=false,true --out "$dir/$p-tune-4096-tiled.json"
    keep sweep --variant regblock "${s[@]}" --param TILE=32,64,128 --param BK=8,16,32 --param REG=2,4,8 \
        --out "$dir/$p-tune-4096-regblock.json"
    keep sweep --variant blocktile1d "${s[@]}" --param BM=32,64,128 --param BN=32,64,128 --param BK=8,16,32 \
        --param TM=4,8,16 --out "$dir/$p-tune-4096-blocktile1d.json"
    for v in vectorized bankfree; do
        keep sweep --variant $v "${s[@]}" --param TILE=64,128 --param BK=8,16 --param REG=4,8 --out "$dir/$p-tune-4096-$v.json"
    done
    keep sweep --variant warptile "${s[@]}" --param BM=64,128,256 --param BN=64,128,256 --param BK=8,16 --param WM=32,64 \
        --param WN=32,64 --param TM=4,8,16 --param TN=4,8,16 --out "$dir/$p-tune-4096-warptile.json"
    for n in 1024 3072; do
        keep sweep --variant pipelined --size $n --fresh --param BM=64,128 --param BN=64,128,256 --param WM=32,64 \
            --param WN=32,64 --param TM=4,8,16 --param TN=4,8 --out "$dir/$p-tune-pipelined-$n.json"
    done
    for n in 4096 8192; do
        keep sweep --variant pipelined --size $n --fresh --param BM=128,256 --param BN=128,256 --param TM=8,16 \
            --param TN=8,16 --out "$dir/$p-sweep-pipelined-threadtile-$n.json"
    done
    keep sweep --variant mma --dtype bf16 "${s[@]}" --param BM=128,256 --param BN=128,256 --param BK=32,64 \
        --param STAGES=3,4 --out "$dir/$p-sweep-mma.json"
    keep sweep --variant mma --dtype bf16 "${s[@]}" --param BM=128,256 --param BN=128,256 --param WM=32,64 \
        --param WN=32,64 --param BK=32 --param STAGES=3 --out "$dir/$p-sweep-mma-warptile.json"
    for n in 4096 8192; do
        for t in bf16 fp16; do
            keep sweep --variant wgmma_ws --dtype $t --size $n --fresh --param GROUP_M=8,16 --param CLUSTER_M=1,2 \
                --out "$dir/$p-sweep-wgmma_ws-$t-$n.json"
        done
    done
    keep sweep --variant wgmma_pingpong --dtype bf16 "${s[@]}" --param BM=64,128 --param BN=128,256 \
        --param STAGES=3,4,5,6 --out "$dir/$p-sweep-wgmma_pingpong.json"
}

scaling() {  # GFLOP/s against N, with the CPU (docs/journal.md)
    keep scaling --variants auto,tiled,regblock --sizes 256,512,1024,2048,3072,4096,8192 --backend numpy \
        --plot "$dir/$p-scaling.png" --json > "$dir/$p-scaling.json"
}

occupancy() {  # copy bandwidth against warps per SM (docs/journal.md)
    keep occupancy --plot "$dir/$p-occupancy.png" --json > "$dir/$p-occupancy.json"
}

profile() {  # ncu: one launch each, and the device's facts (docs/journal.md; tests read them as samples)
    keep profile --variant pipelined --json > "$dir/$p-profile-pipelined.json"
    keep profile --variant wgmma_ws --dtype bf16 --json > "$dir/$p-profile-wgmma_ws.json"
    keep device --json > "$dir/$p-device.json"
}

faults() {  # a crash, a hang, a race and an overrun, with the broken templates of examples/broken/
    {
        echo "# $(date -u +%FT%TZ) commit ${GEMMLAB_COMMIT:-$(git rev-parse --short=12 HEAD)}"
        echo '$ gemmlab compare --variants naive,oob,hang,tiled --kernels-dir examples/broken --size 1024 --timeout 10'
        start=$(date +%s)
        keep compare --variants naive,oob,hang,tiled --kernels-dir examples/broken --size 1024 --timeout 10 \
            --out "$dir/$p-faults.json" 2>&1
        echo "$(( $(date +%s) - start )) s in all"
        for tool in racecheck memcheck; do
            v=$([ "$tool" = racecheck ] && echo racy || echo edge)
            echo "\$ gemmlab run --variant $v --kernels-dir examples/broken --sanitize $tool"
            keep run --variant "$v" --kernels-dir examples/broken --sanitize "$tool" --seed 1 2>&1
            keep run --variant "$v" --kernels-dir examples/broken --sanitize "$tool" --seed 1 --json \
                > "$dir/$p-sanitize-$tool.json"
        done
    } | tee "$dir/$p-faults.txt"
}

dist() {  # several GPUs of one host (PREFIX h100x2 on the 2-GPU kind, h100x4 with GPUS=4; default 2): NCCL's bus bandwidth,
    # the ring at the issue's shard of A (1024 x 4096 per GPU; N = 4096 per GPU, then N = 4096 in all) and
    # 16384^3 over every schedule with its baselines and one GPU's (docs/dist.md); with gemmlab[dist] (nccl4py)
    # also the copy-engine all-gather beside the GEMMs (allgather_ce) at the same shapes, beside the ring
    local g=${GPUS:-2}
    keep dist --measure --gpus "$g" --out "$dir/$p-dist-measure.json"
    if python3 -c "import nccl.core" 2>/dev/null; then  # --measure then has the copy-engine rows too
        keep dist --measure --gpus "$g" --out "$dir/$p-dist-ce-measure.json"
        keep dist --schedule allgather_ce,ring --shape "$((1024 * g)),$((4096 * g)),4096" --dtype bf16 --gpus "$g" --reps 50 \
            --no-single --out "$dir/$p-dist-ce-shard.json"
        keep dist --schedule allgather_ce,ring --shape "$((1024 * g)),4096,4096" --dtype bf16 --gpus "$g" --reps 50 \
            --no-single --out "$dir/$p-dist-ce-shard-n4096.json"
        keep dist --schedule allgather_ce,ring --shape 16384 --dtype bf16 --gpus "$g" --comm-sms 8 \
            --out "$dir/$p-dist-ce-16384.json"
        # one launch that starts on rows as they arrive (docs/dist.md; its chunks = 2 and 4 rows came from copies
        # of kernels/dist/allgather_arrival.toml with that chunks, allgather_arrival2 and 4, beside it)
        keep dist --schedule allgather_arrival,allgather_ce --shape "$((1024 * g)),$((4096 * g)),4096" --dtype bf16 \
            --gpus "$g" --reps 50 --no-single --seed 3 --out "$dir/$p-dist-arrival-shard.json"
        if [ "$g" -gt 2 ]; then
            keep dist --schedule allgather_arrival,allgather_ce --shape 2048,8192,4096 --dtype bf16 --gpus 2 --reps 50 \
                --no-single --seed 3 --out "$dir/$p-dist-arrival-shard-2gpus.json"
        fi
        # the pieces pulled out of the peers' windows (NCCL 2.29.2 or later; docs/dist.md, "Pulls"; its chunks = 2
        # row came from a copy of kernels/dist/allgather_pulls.toml with that chunks, allgather_pulls2)
        if python3 -c "from gemmlab.multigpu.comm import transport_missing as m; raise SystemExit(m('pulls') is not None)"; then
            keep dist --schedule allgather_pulls,allgather_arrival --shape "$((1024 * g)),$((4096 * g)),4096" --dtype bf16 \
                --gpus "$g" --reps 50 --no-single --out "$dir/$p-dist-pulls-shard.json"
        fi
    fi
    keep dist --schedule ring --shape "$((1024 * g)),$((4096 * g)),4096" --dtype bf16 --gpus "$g" --reps 50 --no-single \
        --out "$dir/$p-dist-ring-shard.json"
    keep dist --schedule ring --shape "$((1024 * g)),4096,4096" --dtype bf16 --gpus "$g" --reps 50 --no-single \
        --out "$dir/$p-dist-ring-shard-n4096.json"
    if [ "$g" -gt 2 ]; then  # 2 GPUs of the same host too, for the plot of time against GPUs (1, 2 and g)
        keep dist --schedule all --shape 16384 --dtype bf16 --gpus 2 --comm-sms 8 --out "$dir/$p-dist-16384-2gpus.json"
        keep dist --schedule all --shape 16384 --dtype bf16 --gpus "$g" --comm-sms 8 --out "$dir/$p-dist-16384.json"
        keep report --plot "$dir/$p-dist-16384.png" "$dir/$p-dist-16384-2gpus.json" "$dir/$p-dist-16384.json" >/dev/null
    else
        keep dist --schedule all --shape 16384 --dtype bf16 --gpus "$g" --comm-sms 8 --out "$dir/$p-dist-16384.json" \
            --plot "$dir/$p-dist-16384.png"
    fi
}

problems() {  # the ladders of the problems besides GEMM beside their cupy reference, 3 rounds taken in turn:
    # 2^28 float32 (a 16384 x 16384 transpose), histograms of 2^28 bytes, uniform and skewed; then each one's
    # best rung at its suite's sizes, 1001 to 2^28 (docs/problems.md)
    local n=$((1 << 28)) w
    for w in ${PROBLEMS:-copy transpose reduce scan histogram}; do
        if [ "$w" = transpose ]; then
            keep compare --problem transpose --size 16384 --rounds 3 --out "$dir/$p-problem-transpose.json"
        else
            keep compare --problem "$w" --size "$n" --rounds 3 --out "$dir/$p-problem-$w.json"
        fi
        keep suite --problem "$w" --rounds 3 --out "$dir/$p-suite-$w.json"
    done
    case " ${PROBLEMS:-histogram} " in *" histogram "*)
        keep compare --problem histogram --inputs skewed --size "$n" --rounds 3 --out "$dir/$p-problem-histogram-skewed.json" ;;
    esac
    case " ${PROBLEMS:-scan} " in *" scan "*)  # the sweeps behind lookback's and prefetch's defaults
        keep sweep --variant lookback --param BLOCK=128,256,512 --param V=4,8,16 --size "$n" --rounds 2 \
            --out "$dir/$p-sweep-scan-lookback.json"
        keep sweep --variant prefetch --param BLOCK=128,256 --param V=4,8,16 --param WAVES=2,3,4,6,8 \
            --size "$n" --rounds 2 --out "$dir/$p-sweep-scan-prefetch.json" ;;
    esac
}

fp8() {  # FP8 (issue 43): wgmma_ws_fp8 per scaling mode, e4m3 and e5m2, 5 rounds taken in turn, at the issue's
    # shapes (docs/fp8.md). Per-tensor scales beside cuBLASLt's FP8 twice: torch._scaled_mm (the cuBLAS row) and
    # nvmath-python's autotuned best (--refs cublaslt). Both take per-tensor scales whatever SCALE is, so the row- and
    # block-scale files hold cuBLASLt's per-tensor row only, as the yardstick (block's goal: 85% of our per-tensor
    # rate); `report --versus wgmma_ws_fp8 --against cuBLASLt` makes the README's table of the e4m3 files. DTYPES= picks
    local s d
    for d in ${DTYPES:-e4m3 e5m2}; do
        for s in "4096 4096 4096" "8192 8192 8192" "8192 8192 4096"; do
            set -- $s
            keep run --variant wgmma_ws_fp8 --dtype "$d" -p SCALE=tensor -M "$1" -N "$2" -K "$3" --rounds 5 \
                --refs cublaslt --out "$dir/$p-fp8-$d-tensor-$1x$2x$3.json"
            keep run --variant wgmma_ws_fp8 --dtype "$d" -p SCALE=row -M "$1" -N "$2" -K "$3" --rounds 5 --no-cublas \
                --refs cublaslt --out "$dir/$p-fp8-$d-row-$1x$2x$3.json"
            keep run --variant wgmma_ws_fp8 --dtype "$d" -p SCALE=block -p BN=128 -p OVERLAP=sets -M "$1" -N "$2" -K "$3" \
                --rounds 5 --no-cublas --refs cublaslt --out "$dir/$p-fp8-$d-block-$1x$2x$3.json"
        done
    done
}

fp8holdout() {  # FP8 (issue 43) on shapes never tuned on: 5 drawn now (M, N, K multiples of 128 in 2048..16384; SEED=
    # repeats a draw), then the three tuned ones, per-tensor e4m3 beside cuBLASLt, 3 rounds taken in turn, in one compare
    # each with block scales (benchmarks/h100-fp8-holdout/fp8_block.cu.j2, so that both are in one run); e5m2 once
    local seed=${SEED:-$(python3 -c "import random; print(random.SystemRandom().randrange(2**31))")} x M N K
    local held=$(python3 -c "
import random; rng = random.Random($seed); tuned = {(4096, 4096, 4096), (8192, 8192, 4096), (8192, 8192, 8192)}; out = []
while len(out) < 5:
    s = tuple(128 * rng.randint(16, 128) for _ in range(3))
    if s not in tuned and s not in out: out.append(s)
print(' '.join('x'.join(map(str, s)) for s in out))")
    echo "hold-out seed $seed: $held" | tee "$dir/holdout.txt"
    local v=wgmma_ws_fp8,fp8_block kdir=benchmarks/h100-fp8-holdout
    for x in $held 4096x4096x4096 8192x8192x4096 8192x8192x8192; do
        IFS=x read -r M N K <<< "$x"
        local tag=tuned; [[ " $held " == *" $x "* ]] && tag=holdout
        keep compare --variants $v --kernels-dir $kdir --dtype e4m3 -M "$M" -N "$N" -K "$K" --rounds 3 --refs cublaslt \
            --out "$dir/$p-fp8-e4m3-$tag-$x.json"
    done
    IFS=x read -r M N K <<< "${held%% *}"
    keep compare --variants $v --kernels-dir $kdir --dtype e5m2 -M "$M" -N "$N" -K "$K" --rounds 3 \
        --refs cublaslt --out "$dir/$p-fp8-e5m2-holdout-${held%% *}.json"
}

fp8transpose() {  # FP8 (issue 43): B read as it is (K x N) and transposed stage by stage in shared memory inside the
    # kernel (fp8_kn: B_LAYOUT=kn BN=128), beside the default on B^T made with the inputs, outside the timing
    # (wgmma_ws_fp8, BN=192), the default's code at fp8_kn's tile (fp8_nk128: what fp8_kn costs over it is the
    # transpose's) and cuBLASLt, per-tensor e4m3, 5 rounds taken in turn (benchmarks/h100-fp8-transpose/*.cu.j2)
    local x M N K kdir=benchmarks/h100-fp8-transpose
    for x in 4096x4096x4096 8192x8192x4096; do
        IFS=x read -r M N K <<< "$x"
        keep compare --variants wgmma_ws_fp8,fp8_nk128,fp8_kn --kernels-dir $kdir --dtype e4m3 -M "$M" -N "$N" -K "$K" \
            --rounds 5 --refs cublaslt --out "$dir/$p-fp8-e4m3-transpose-$x.json"
    done
}

pcie() {  # host <-> device copies, 1 KB to 1 GB, pageable and pinned, against the PCIe link (NVML); the transpose's
    # shared-memory bank conflicts per request under ncu, without the padding and with it (docs/problems.md)
    keep pcie --out "$dir/$p-pcie.json" --plot "$dir/$p-pcie.png"
    local v
    for v in smem_tile padded_tile; do
        keep profile --problem transpose --variant "$v" --json > "$dir/$p-profile-transpose-$v.json"
    done
}

refs() {  # cuBLASLt's autotuned best (nvmath-python) and Triton's matmul (torch.compile max-autotune) beside cuBLAS
    # and wgmma_ws, bf16, C in fp32 and in bf16, 5 rounds taken in turn (--refs; docs/ladder.md). SHAPES=MxNxK... picks
    local s M N K o
    for s in ${SHAPES:-4096x4096x4096 3000x5000x2000 4097x4095x4093}; do
        IFS=x read -r M N K <<< "$s"
        for o in fp32 bf16; do
            keep compare --rounds 5 --dtype bf16 --out-dtype "$o" --variants wgmma_ws -M "$M" -N "$N" -K "$K" \
                --refs cublaslt,triton --out "$dir/$p-refs-bf16-$s-$o.json"
        done
    done
}

case "$what" in
    all) for w in ladder tensor versus outdtype sweeps suite anyshape tune scaling occupancy profile faults; do "$w"; done ;;
    ladder|tensor|versus|outdtype|sweeps|suite|anyshape|tune|scaling|occupancy|profile|faults|dist|problems|fp8|fp8holdout|fp8transpose|pcie|refs) "$what" ;;
    *) echo "regenerate.sh: unknown group '$what'" >&2; exit 2 ;;
esac
