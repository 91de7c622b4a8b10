"""GEMM over several GPUs: one process per GPU, NCCL between them, our kernels on each.

    schedule.py   the schedules of kernels/dist/ (data) and their arithmetic: blocks, GEMMs, bytes (no GPU)
    launcher.py   rank and world size from mpirun, srun or torchrun, and the NCCL id passed through them
    inputs.py     inputs any rank makes its block of, from a seed; the reference and check of C
    comm.py       NCCL through cupy, CUDA streams and events: the two interfaces a rank runs on
    execute.py    one rank's buffers and steps on two streams (overlap)
    rank.py       one rank's process: check, then time each schedule
    job.py        start the ranks (or be one, under a launcher), watch them, stop them all on a fault
"""
