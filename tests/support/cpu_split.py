"""Whose CPU a benchmark run spent: the sender's, PostgreSQL's and the sink's.

On a small machine the sender, the database server and the SMTP sink share the same
cores, so a sender's rate also depends on what the others burn. ``CpuMeter`` reads, before
and after a run, the CPU seconds (user + system) of:

- the sender: this process's waited-for children (``RUSAGE_CHILDREN``), so the run's
  process must have been waited for when the run ends;
- PostgreSQL: the postmaster and every process under it, the backends that already
  exited included (their time is added to the postmaster's own children's time when it
  reaps them), read from ``/proc``;
- the sink: its process, read from ``/proc``.

    meter = CpuMeter(sink_pid=sink.process.pid, postmaster_pid=postmaster_pid(data_dir))
    before = meter.read()
    ... run, wait for the sender ...
    spent = meter.read() - before      # a CpuSplit of seconds
"""

from __future__ import annotations

import dataclasses
import os
import resource
from pathlib import Path

PROC = Path("/proc")
TICKS_A_SECOND = os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass(frozen=True)
class CpuSplit:
    """CPU seconds of the sender, PostgreSQL (0 when none runs) and the sink."""

    sender: float
    postgres: float
    sink: float

    def __sub__(self, other: CpuSplit) -> CpuSplit:
        return CpuSplit(
            self.sender - other.sender, self.postgres - other.postgres, self.sink - other.sink
        )

    def per_message_ms(self, messages: int) -> CpuSplit:
        scale = 1000 / messages
        return CpuSplit(self.sender * scale, self.postgres * scale, self.sink * scale)

    @property
    def total(self) -> float:
        return self.sender + self.postgres + self.sink


def process_seconds(pid: int, *, reaped_children: bool = False) -> float:
    """CPU seconds of process `pid` (and of its children it has reaped, if asked); 0 when
    it is gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return 0.0
    # the fields after the command's closing parenthesis: utime is the 14th field of the
    # line, stime the 15th, cutime and cstime the 16th and 17th
    fields = stat.rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    if reaped_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICKS_A_SECOND


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    children = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            children.append(int(entry.name))
    return children


def postmaster_pid(data_dir: str) -> int:
    """The postmaster's pid, the first line of its ``postmaster.pid``."""
    return int((Path(data_dir) / "postmaster.pid").read_text().split("\n", 1)[0])


class CpuMeter:
    """Reads the CPU seconds spent so far by the sender, PostgreSQL and the sink."""

    def __init__(self, *, sink_pid: int, postmaster_pid: int | None) -> None:
        self.sink_pid = sink_pid
        self.postmaster_pid = postmaster_pid

    def read(self) -> CpuSplit:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return CpuSplit(
            sender=children.ru_utime + children.ru_stime,
            postgres=self._postgres_seconds(),
            sink=process_seconds(self.sink_pid),
        )

    def _postgres_seconds(self) -> float:
        if self.postmaster_pid is None:
            return 0.0
        alive = sum(process_seconds(pid) for pid in children_of(self.postmaster_pid))
        return process_seconds(self.postmaster_pid, reaped_children=True) + alive
