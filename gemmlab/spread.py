"""sweep, compare and suite under a launcher (mpirun, srun, torchrun; issue 46): each rank measures its
share of the work on its own GPU, and rank 0 gathers the rows and keeps them as one process would.

    mpirun -n 16 gemmlab sweep --variant tiled --size 4096 --param TILE=8,16,32 ...

The items are split round-robin by index (sweep: the configurations; compare: the variants; suite: the
shapes, each with all its jobs, so that its x cuBLAS is one GPU's). Rank 0 makes the seed and passes it
to every rank first (random inputs, and --random's shapes, are the same everywhere), through the
launcher's own channel (gemmlab/multigpu/launcher.py: MPI, torch's TCP store, or a --store file). Every
rank measures cuBLAS itself, so each row's x cuBLAS is against the GPU that ran it. At the end each rank
hands its rows to rank 0, which records them in the history, merges them in the order one process
gives, and writes --out and the table; the other ranks print nothing but their errors. Rank 0 waits
for the others as long as its own share took, plus ten times --timeout; a rank that has not delivered
by then is named in the document's "fault", and the rows that came are kept.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass

from .errors import GemmlabError
from .multigpu.launcher import Place, channel, from_env

WAIT_FACTOR = 10  # rank 0 waits for the others its own share's time plus this many --timeout


@dataclass
class Team:
    """This process's rank in a launcher's job of several, and how it talks to the others."""
    place: Place
    link: object  # a launcher.channel
    seed: int  # rank 0's, the same in every rank
    key: str  # names this job's parts among older ones (rank 0's, passed to all)
    host: str
    started: float  # time.monotonic() once the team was formed

    @property
    def lead(self) -> bool:
        return self.place.rank == 0

    def share(self, items: list) -> list:
        """This rank's items: every world-th, from its rank on."""
        return list(items)[self.place.rank::self.place.world]

    def gpu(self, env=None) -> int:
        """The GPU of this host that is this rank's (launcher.Place.gpu, as dist's ranks take theirs)."""
        return self.place.gpu(env)

    def tag(self, rows: list[dict], rank: int, host: str) -> list[dict]:
        for r in rows:
            r.update(rank=rank, host=host)
        return rows

    def deliver(self, command: str, doc: dict | None, rows: list[dict], error: GemmlabError | None = None) -> dict:
        """A rank other than 0: its rows (or its error) to rank 0. The document this rank returns: no rows
        of the whole, only which rank it is."""
        part = {"host": self.host, "doc": doc, "rows": rows}
        if error is not None:
            part["error"] = error.message + (f" ({error.hint})" if error.hint else "")
        self.link.gather(json.dumps(part, default=str).encode(), self.key, 0)
        for r in rows:
            r.pop("_record", None)  # rank 0 records them; this rank's caller sees its rows as measured
        return {"command": command, "rank": self.place.rank, "ranks": self.place.world, "seed": self.seed,
                "launcher": self.place.launcher}

    def gather(self, doc: dict, rows: list[dict], recorder, timeout: float) -> list[dict]:
        """Rank 0: every rank's rows after its own, each tagged with its rank and host, the others'
        taken by `recorder` (into the history, with their change since the last run) as their own ranks
        measured them. The document gains the ranks, the launcher, each rank's host and GPU, and a
        "fault" naming each rank that failed or did not deliver."""
        wait = time.monotonic() - self.started + WAIT_FACTOR * timeout
        got = self.link.gather(b"", self.key, wait)
        faults, ranks, merged = [], [{"rank": 0, "host": self.host, "device": doc["device"]["name"],
                                      "rows": len(rows)}], self.tag(rows, 0, self.host)
        for r in range(1, self.place.world):
            if r not in got:
                faults.append(f"rank {r} did not deliver its rows within {wait:.0f} s")
                continue
            part = json.loads(got[r])
            if part.get("error"):
                faults.append(f"rank {r} ({part['host']}): {part['error']}")
            theirs = self.tag(part["rows"], r, part["host"])
            for row in theirs:
                where = row.pop("_record", None)
                if where is not None:
                    recorder.take(row, where)
            sub = part.get("doc") or {}
            ranks.append({"rank": r, "host": part["host"], "device": (sub.get("device") or {}).get("name"),
                          "rows": len(theirs)})
            if sub.get("interrupted"):
                doc["interrupted"] = True
            notes = [n for n in sub.get("notes", []) if n not in doc.get("notes", [])]
            if notes:
                doc["notes"] = doc.get("notes", []) + notes
            merged += theirs
        doc.update(ranks=self.place.world, launcher=self.place.launcher, by_rank=ranks)
        if faults:
            doc["fault"] = "; ".join(faults)
        return merged


def refuse_gpus(gpus, place: Place | None = None) -> None:
    """--gpus N (or all) under a launcher of several ranks: one error, as dist gives."""
    place = place or from_env()
    if place.world > 1 and gpus != 1:
        raise GemmlabError(f"--gpus {gpus or 'all'} under {place.launcher}, which started {place.world} ranks",
                           hint="under a launcher each rank takes one GPU: leave --gpus out")


def join(seed: int | None, store: str | None = None, timeout: float = 120.0, env=None) -> Team | None:
    """The team this process is part of under a launcher of several ranks (None without one): rank 0's
    seed (`seed`, else a fresh one) and the job's key, passed to every rank."""
    from .jobs import fresh_seed
    place = from_env(env)
    if place.world == 1:
        return None
    started = time.monotonic()
    link = channel(place, store, timeout, env, what="the seed")

    def make() -> bytes:
        return json.dumps({"seed": fresh_seed() if seed is None else seed, "key": os.urandom(8).hex()}).encode()

    said = json.loads(link.bcast(make))
    return Team(place, link, said["seed"], said["key"], socket.gethostname(), started)
