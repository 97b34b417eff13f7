"""Who is rating which remainder item now: the remainder is one evaluator an item, so the queue hands an item to one
person at a time. Handing it out leases it to that evaluator for ``LEASE_S`` seconds; while the lease holds, the
queue hands the others the next item. A person holds one lease at a time (taking the next item gives the last one
back), a saved rating gives its item's lease back, and a lease past its time is nobody's: a person who walked away
keeps no item from the rest for longer than that.

The leases of one rubric and checkpoint are a small JSON file under the ratings folder
(``.annotate/<rubric>/<checkpoint>.leases.json``), read and written under an ``flock``, so every annotate process
serving that folder shares them; a lost or unreadable file is no lease at all (at worst two people rate one item,
as before leases: both ratings are kept).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from eval_pipeline.core.ids import check_checkpoint_id, check_identifier
from eval_pipeline.core.locks import file_lock
from eval_pipeline.publish.annotate.files import atomic_write

LEASE_S = 900.0  # how long an item handed out stays that evaluator's


class Leases:
    """The remainder leases of one rubric and checkpoint under the ratings folder ``root``."""

    def __init__(self, root: Path, rubric: str, checkpoint_id: str, lease_s: float = LEASE_S):
        folder = Path(root) / ".annotate" / check_identifier(rubric, "rubric name")
        self.path = folder / f"{check_checkpoint_id(checkpoint_id)}.leases.json"
        self.lock = folder / f"{checkpoint_id}.leases.lock"
        self.lease_s = lease_s

    @contextmanager
    def _held(self) -> Iterator[dict[str, list[object]]]:
        """The leases now (expired ones dropped), written back when the block changed them."""
        with file_lock(self.lock):
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except (FileNotFoundError, ValueError):
                data = {}
            now = time.time()
            leases = {
                str(sid): held
                for sid, held in (data.items() if isinstance(data, dict) else [])
                if isinstance(held, list) and len(held) == 2 and isinstance(held[1], (int, float)) and held[1] > now
            }
            before = json.dumps(leases, sort_keys=True)
            yield leases
            if json.dumps(leases, sort_keys=True) != before or len(leases) != len(data):
                atomic_write(self.path, json.dumps(leases, sort_keys=True).encode())

    def take(self, evaluator: str, candidates: Iterable[str]) -> str | None:
        """The first of ``candidates`` (in the queue's order) no other evaluator holds now, leased to ``evaluator``
        (whose other lease is given back); None when every candidate is held by somebody else."""
        with self._held() as leases:
            for sid in candidates:
                holder = leases.get(sid)
                if holder is None or holder[0] == evaluator:
                    for other in [s for s, h in leases.items() if h[0] == evaluator and s != sid]:
                        del leases[other]
                    leases[sid] = [evaluator, time.time() + self.lease_s]
                    return sid
        return None

    def give_back(self, evaluator: str, sid: str) -> None:
        """``evaluator``'s lease of ``sid`` ended (the rating is saved)."""
        with self._held() as leases:
            if leases.get(sid, [None])[0] == evaluator:
                del leases[sid]
