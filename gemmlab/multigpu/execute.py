"""One rank's part of a schedule: its blocks, its buffers, and the steps as work queued on two streams.

    run = RankRun(schedule, plan, shape, dtype, seed, rt, comm, gemm, overlap=True)
    run.once()            # the schedule, on the compute and comm streams (asynchronous)
    run.compute_only()    # the same local GEMMs alone, no communication: what overlap can at best reach

`gemm(A, B, C)` returns a launch of C = A @ B on the current stream (our kernel bound to those arrays,
or cuBLAS), made once per buffer so that a repetition only queues launches. `rt` and `comm` are the
interfaces of gemmlab/multigpu/comm.py.

Overlap (ring, summa, allgather_overlap): the GEMMs run on the compute stream, NCCL on the comm stream,
with events between them where a buffer changes hands. Two rules make that safe, and the CPU tests run
every schedule with streams executed in the most hostile order the events allow (tests/dist_fakes.py):
- a GEMM waits for the transfer that brings its block (compute waits on `arrived`);
- a transfer into a buffer waits for the GEMM that last read that buffer (comm waits on `done`), two
  steps back, since blocks alternate between two receive buffers. The blocks a rank starts with are
  never written, so every repetition multiplies the same inputs.

A schedule with engines = "copy" gets the buffers it gathers into from `comm.symmetric(shape, dtype)`:
memory in a symmetric window, at the same offset on every rank (allocated in the same order everywhere),
which is what lets NCCL run the all-gather on the copy engines.

allgather_overlap with arrival = true makes one launch, `gemm(A, B, C, arrival=...)`, over all of C's
rows, whose tiles wait in the kernel for their chunk (gemmlab/gpu/arrival.py): no event orders the GEMM
after the all-gathers; instead the comm stream writes the repetition's epoch into chunk c's flag once the
chunk has landed (`rt.write_value`), and each repetition has a new epoch, so that no flag left by an
earlier one lets a tile read rows still on their way. With transport = "pulls" each chunk is one batch of
copies out of the other ranks' windows instead of an all-gather (comm.pull_all: piece c of each other
rank's block, from the same rows of its gathered buffer), behind one barrier a repetition (comm.barrier).

A timeline (`marks`, a list, where asked for: rank.py sets it for the timed repetitions only) is what an
arrival step's repetition did when, as timing events that each once() appends as one list: [the comm
stream's start, its barrier done (None without one), chunk 0's rows landed, ..., the GEMM's launch
reached on the compute stream, the GEMM done]. A chunk's event comes just before its flag, so it is the
earliest moment its tiles could start. Without marks no event is added to a repetition.
"""

from __future__ import annotations

from ..errors import GemmlabError
from ..gpu.arrival import Arrival
from .inputs import block
from .schedule import RankPlan, Schedule


class RankRun:
    def __init__(self, sched: Schedule, plan: RankPlan, shape, dtype: str, seed: int, rt, comm, gemm,
                 overlap: bool = True):
        self.sched, self.plan, self.rt, self.comm, self.gemm = sched, plan, rt, comm, gemm
        self.overlap = overlap and sched.overlaps
        xp = rt.xp
        self.A = block(xp, seed, "A", plan.A, shape.K, dtype)  # never written: the next repetition's inputs
        self.B = block(xp, seed, "B", plan.B, shape.N, dtype)
        self.C = xp.zeros((plan.C.rows, plan.C.cols), dtype=xp.float32)
        self.outputs = [self.C]  # every array a GEMM or a sum writes: poisoned before a check
        self.steps = []          # functions that queue one step each
        self.marks = None        # a list where a timeline is asked for: each repetition's events (above)
        self.gemms = []          # the local GEMMs in order, as (launch, accumulate-into-C or None)
        held = {"A": self.A, "B": self.B}
        for step in sched.steps:
            getattr(self, "_" + step.op)(step, held)

    # ------------------------------------------------------------------ the vocabulary

    def _gathered(self, shape, dtype):
        """A buffer that an all-gather fills: in a symmetric window where the copy engines move it."""
        if self.sched.copy_engines:
            return self.comm.symmetric(shape, dtype)
        return self.rt.xp.zeros(shape, dtype=dtype)

    def _allgather(self, step, held) -> None:
        """In place: the rank's own block is copied once into its rows of the whole, and NCCL fills the
        others' rows (the copy engines need both ends in the window)."""
        mine = held[step.operand]
        rows, r = mine.shape[0], self.plan.rank
        whole = self._gathered((rows * self.plan.ranks, mine.shape[1]), mine.dtype)
        whole[r * rows:(r + 1) * rows] = mine
        held[step.operand] = whole
        self._written_by_others(whole, rows)
        rt, comm, send = self.rt, self.comm, whole[r * rows:(r + 1) * rows]
        self.steps.append(lambda: comm.allgather(send, whole, rt.compute))

    def _written_by_others(self, whole, rows) -> None:
        """The other ranks' rows of a gathered buffer are the all-gather's output: poisoned before the
        check, so that a GEMM which reads them before they arrive fails it."""
        r = self.plan.rank
        for p in range(self.plan.ranks):
            if p != r:
                self.outputs.append(whole[p * rows:(p + 1) * rows])

    def _gemm(self, step, held) -> None:
        A, B, xp = held["A"], held["B"], self.rt.xp
        if any(s.op == "reduce_scatter" for s in self.sched.steps):  # a partial product of all of C
            out = xp.zeros((A.shape[0], B.shape[1]), dtype=xp.float32)
            self.outputs.append(out)
        else:
            out = self.C
        if out.shape != (A.shape[0], B.shape[1]) or A.shape[1] != B.shape[0]:
            raise GemmlabError(f"{self.sched.name}: a GEMM of {A.shape} by {B.shape} into {out.shape} (a gemmlab bug)")
        held["C"] = out
        launch = self.gemm(A, B, out)
        self.gemms.append((launch, None))
        self.steps.append(lambda: self._on_compute(launch))

    def _reduce_scatter(self, step, held) -> None:
        partial, rt, comm, C = held["C"], self.rt, self.comm, self.C
        self.steps.append(lambda: comm.reduce_scatter(partial, C, rt.compute))

    def _ring(self, step, held) -> None:
        """P steps; at step s the block in hand is A[(r - s) mod P]: multiply it into its rows of C while
        sending it to rank r+1 and receiving the next from rank r-1."""
        P, r, xp = self.plan.ranks, self.plan.rank, self.rt.xp
        own = self.A
        recv = [xp.zeros_like(own) for _ in range(min(P - 1, 2))]
        hand = [own] + [recv[(s - 1) % 2] for s in range(1, P)]
        rows = own.shape[0]
        launches = [self.gemm(hand[s], self.B, self.C[(r - s) % P * rows:((r - s) % P + 1) * rows]) for s in range(P)]
        self.gemms += [(launch, None) for launch in launches]
        nxt, prv = (r + 1) % P, (r - 1) % P
        moves = [([(hand[s], nxt)], [(recv[s % 2], prv)]) for s in range(P - 1)]
        self.steps.append(lambda: self._pipeline(moves, launches, [None] * P))

    def _allgather_overlap(self, step, held) -> None:
        """The all-gather of A in `chunks` all-gathers on the comm stream, while the compute stream first
        multiplies the rank's own block (which needs nothing), then each chunk's P-1 pieces as the chunk
        arrives. Chunk c of every rank's block goes to gathered[c] (P pieces of m/chunks rows, rank-major),
        and piece p's GEMM writes straight into its rows of C: p*m + c*m/chunks onwards."""
        P, r, xp = self.plan.ranks, self.plan.rank, self.rt.xp
        own, chunks = self.A, step.chunks
        m, K = own.shape
        mc = m // chunks
        gathered = self._gathered((chunks * P * mc, K), own.dtype)
        pieces = [[gathered[(c * P + p) * mc:(c * P + p + 1) * mc] for p in range(P)] for c in range(chunks)]
        for c in range(chunks):
            pieces[c][r][...] = own[c * mc:(c + 1) * mc]  # the in-place all-gather's send: copied once
            self._written_by_others(gathered[c * P * mc:(c + 1) * P * mc], mc)
        C = self.C
        if P == 1:
            moves = []
        elif step.transport == "pulls":  # chunk c: piece c of every other rank's block, from its window
            moves = [[(pieces[c][p], p) for p in range(P) if p != r] for c in range(chunks)]
        else:  # chunk c: this rank's piece, all-gathered into the chunk's rows
            moves = [(pieces[c][r], gathered[c * P * mc:(c + 1) * P * mc]) for c in range(chunks)]
        if step.arrival:
            flags = Arrival(xp.zeros(chunks, dtype=xp.uint32), r, P, chunks, mc)
            return self._arrival(gathered, moves, flags, step.transport)
        first = self.gemm(own, self.B, C[r * m:(r + 1) * m])
        later = [[self.gemm(pieces[c][p], self.B, C[p * m + c * mc:p * m + (c + 1) * mc]) for p in range(P) if p != r]
                 for c in range(chunks)]
        self.gemms += [(first, None)] + [(g, None) for c in later for g in c]
        self.steps.append(lambda: self._gather_beside(first, moves, later))

    def _gather_beside(self, first, moves, later) -> None:
        rt, comm = self.rt, self.comm
        side = rt.comm if self.overlap else rt.compute
        arrived = []
        for send, whole in moves:  # queued first: the comm stream starts them while the first GEMM runs
            comm.allgather(send, whole, side)
            if self.overlap:
                arrived.append(rt.record(side))
        self._on_compute(first)
        for c, gemms in enumerate(later):
            if self.overlap and gemms:
                rt.wait(rt.compute, arrived[c])
            for g in gemms:
                self._on_compute(g)

    def _arrival(self, gathered, moves, arrival, transport: str) -> None:
        """One launch over all the gathered rows. Alone (compute_only) the rows are all there: the compute
        stream raises every flag to the new epoch just before the launch."""
        rt, launch = self.rt, self.gemm(gathered, self.B, self.C, arrival=arrival)

        def alone():
            arrival.epoch += 1
            for c in range(arrival.chunks):
                rt.write_value(rt.compute, arrival.flags, c, arrival.epoch)
            launch()
        self.gemms.append((alone, None))
        self.steps.append(lambda: self._arrive_beside(launch, moves, arrival, transport))

    def _arrive_beside(self, launch, moves, arrival, transport: str = "allgather") -> None:
        """The chunks' all-gathers, each followed by its flag, queued before the launch that waits for
        them: the comm stream's work needs no SM, so it goes on while the GEMM holds them all. With "pulls"
        each chunk is one batch of copies of the others' pieces out of their windows into this rank's rows,
        behind one barrier: every rank's own rows are in its window before anyone reads them (they are
        never written again, and this rank's previous GEMM is done with its rows: the comm stream starts
        after it), so each flag waits for this rank's own copies only."""
        rt, comm = self.rt, self.comm
        side = rt.comm if self.overlap else rt.compute
        mark, barrier = self._mark, transport == "pulls" and moves
        arrival.epoch += 1  # read by launch() below, and written by the comm stream after each chunk
        events = [mark(side)]
        if barrier:
            comm.barrier(side)
        events.append(mark(side) if barrier else None)
        for c, move in enumerate(moves):
            if transport == "pulls":
                comm.pull_all(move, side)
            else:
                comm.allgather(*move, side)
            events.append(mark(side))
            rt.write_value(side, arrival.flags, c, arrival.epoch)
        events.append(mark(rt.compute))
        self._on_compute(launch)
        events.append(mark(rt.compute))
        if self.marks is not None:
            self.marks.append(events)

    def _mark(self, stream):
        """A timing event on `stream` where a timeline is asked for (self.marks); else nothing is recorded."""
        return self.rt.record(stream, timing=True) if self.marks is not None else None

    def _summa(self, step, held) -> None:
        """q steps on the q x q grid: at step k rank (i, k) sends A(i, k) along row i and rank (k, j) sends
        B(k, j) along column j; every rank adds A(i, k) @ B(k, j) into C(i, j)."""
        q, (i, j), xp = self.plan.grid[0], self.plan.coords, self.rt.xp
        A, B = self.A, self.B
        Apan = [xp.zeros_like(A) for _ in range(2 if q > 1 else 0)]
        Bpan = [xp.zeros_like(B) for _ in range(2 if q > 1 else 0)]
        a_at = [A if j == k else Apan[k % 2] for k in range(q)]
        b_at = [B if i == k else Bpan[k % 2] for k in range(q)]
        T = xp.zeros_like(self.C) if q > 1 else None
        if T is not None:
            self.outputs.append(T)
        launches = [self.gemm(a_at[k], b_at[k], self.C if k == 0 else T) for k in range(q)]
        adds = [None] + [T] * (q - 1)
        self.gemms += list(zip(launches, adds))
        moves = []
        for k in range(q):
            sends, recvs = [], []
            if j == k:
                sends += [(A, i * q + c) for c in range(q) if c != j]
            else:
                recvs.append((Apan[k % 2], i * q + k))
            if i == k:
                sends += [(B, r * q + j) for r in range(q) if r != i]
            else:
                recvs.append((Bpan[k % 2], k * q + j))
            moves.append((sends, recvs))
        self.steps.append(lambda: self._pipeline(moves, launches, adds, first_moves=True))

    # ------------------------------------------------------------------ running it

    def _on_compute(self, launch, add=None) -> None:
        with self.rt.on(self.rt.compute):
            launch()
            if add is not None:
                self.rt.add(self.C, add)

    def _pipeline(self, moves, launches, adds, first_moves: bool = False) -> None:
        """GEMM s with the transfer that the next GEMM needs beside it. The ring's moves[s] brings step
        s+1's block (its first block is the rank's own); summa's moves[k] brings step k's panels."""
        rt, comm = self.rt, self.comm
        ahead = 0 if first_moves else 1  # moves[m] feeds GEMM m + ahead
        side = rt.comm if self.overlap else rt.compute
        arrived, done = {}, {}  # step -> event: its block is here; its GEMM has read its block
        steps = len(launches)

        def move(m):
            target = m + ahead  # the GEMM this move feeds; it overwrites what GEMM target - 2 read
            if self.overlap and target - 2 in done:
                rt.wait(side, done[target - 2])
            comm.exchange(*moves[m], side)
            if self.overlap:
                arrived[target] = rt.record(side)

        if first_moves and moves:
            move(0)
        for s in range(steps):
            m = s + 1 if first_moves else s  # the move to start beside GEMM s
            if m < len(moves):
                move(m)
            if self.overlap and s in arrived:
                rt.wait(rt.compute, arrived[s])
            self._on_compute(launches[s], adds[s])
            if self.overlap:
                done[s] = rt.record(rt.compute)

    def once(self) -> None:
        """Queue the whole schedule; the compute stream ends after the comm stream's last work."""
        rt = self.rt
        rt.wait(rt.comm, rt.record(rt.compute))  # the comm stream starts after what came before
        for step in self.steps:
            step()
        rt.wait(rt.compute, rt.record(rt.comm))

    def compute_only(self) -> None:
        """The local GEMMs (and summa's sums) alone, on the compute stream."""
        for launch, add in self.gemms:
            self._on_compute(launch, add)

    def poison(self) -> None:
        """NaN in everything the schedule writes: an element nobody writes fails the check."""
        with self.rt.on(self.rt.compute):
            for x in self.outputs:
                self.rt.fill(x, _nan(x.dtype))


def _nan(dtype):
    """NaN as an array of `dtype` holds it: bfloat16 and FP8 inputs are stored as their bits."""
    if dtype.kind == "f":
        return float("nan")
    return {2: 0x7FC0, 1: 0x7F}[dtype.itemsize]  # bfloat16's quiet NaN; FP8's (E4M3 and E5M2) NaN


def gather(run: RankRun, plans: list[RankPlan], shape, comm, rt):
    """Rank 0: the whole C from every rank's block (None on the other ranks). Outside any timing."""
    xp, r = rt.xp, run.plan.rank
    if r != 0:
        comm.exchange([(run.C, 0)], [], rt.compute)
        rt.synchronize()
        return None
    C = xp.empty((shape.M, shape.N), dtype=xp.float32)
    bufs = [(xp.empty((p.C.rows, p.C.cols), dtype=xp.float32), p) for p in plans[1:]]
    comm.exchange([], [(b, p.rank) for b, p in bufs], rt.compute)
    rt.synchronize()
    for b, p in [(run.C, plans[0])] + bufs:
        if b.shape != (p.C.rows, p.C.cols):
            raise GemmlabError(f"rank {p.rank}'s block of C is {b.shape}, not {p.C.rows} x {p.C.cols}")
        C[p.C.row0:p.C.row0 + p.C.rows, p.C.col0:p.C.col0 + p.C.cols] = b
    return C
