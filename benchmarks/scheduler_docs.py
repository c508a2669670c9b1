"""docs/cost.md's scheduler figures (and docs/choosing.md's), rewritten from
benchmarks/scheduler_model.py as it computes them from benchmarks/measured.json: run by
`bash scripts/bench cpu` after it measures (tests/unit/test_scheduler_slots.py holds the
docs to the model).

    python -m benchmarks.scheduler_docs
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks import scheduler_model as m

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _table(text: str, header: str, rows: list[str]) -> str:
    """`text` with the rows of the table whose header line starts with `header` replaced."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(header)) + 2
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    lines[start:end] = rows
    return "\n".join(lines)


def _money(value: float) -> str:
    return f"${value:.2f}"


def cost_md(text: str) -> str:
    ten, hundred = m.all_in(10.0)["total"], m.all_in(100.0)["total"]
    fired = m.firing_cost(m.SLOT, 10.0)
    batch, single = m.REGISTRATION["batches of 100"], m.REGISTRATION["one POST each"]
    logged = m.MEASURED["log_bytes"]
    text = _table(text, "| messages fired | slot clock", m.density_rows())
    text = _table(
        text, "| messages a second | firing | registration | logs | storage", m.all_in_rows()
    )
    text = _table(text, "| clock | functions | table | p50", m.burst_rows())
    text = _table(text, "| memory, MB | first | p99", m.memory_rows())
    text = _table(
        text,
        "| period, minutes | runs a month",
        [
            f"| {p} | {m.sweep_month(p)['runs']:,.0f} | {m.sweep_month(p)['dollars']:.3f} |"
            for p in m.SWEEP_PERIODS
        ],
    )
    text = _table(
        text,
        "| period, minutes | window, minutes",
        [f"| {p} | {w} | {m.sweep_per_message(p, w):.2f} |" for p, w in m.SWEEP_SETTINGS],
    )
    row = (
        f"| 3 scheduler, 10 messages a second | registration (batches of 100) {batch:.2f} + "
        f"firing by the slot clock {fired:.2f} (table below) | **≈ {batch + fired:.1f}** (≈ "
        f"{single + fired:.1f} with one POST per message; all in: {ten:.2f}, below) |"
    )
    text = re.sub(r"^\| 3 scheduler, 10 messages a second \|.*$", row, text, flags=re.M)
    said = {
        r"scheduler costs \$[0-9.]+ per million all in": f"scheduler costs {_money(ten)} "
        "per million all in",
        r"at 100 a second\n\$[0-9.]+,": f"at 100 a second\n{_money(hundred)},",
        r"second's 100 messages: \$[0-9.]+\)": "second's 100 messages: "
        f"{_money(m.firing_parts(m.SLOT, 100.0)['workers'])})",
        r"Registering: \$[0-9.]+ per million": f"Registering: {_money(batch)} per million",
        r"It costs \$[0-9.]+ a dense second of\n1,000 messages, \$[0-9.]+ of 10,000": "It "
        f"costs ${m.warm_up_dollars(1000):.4f} a dense second of\n1,000 messages, "
        f"${m.warm_up_dollars(10_000):.4f} of 10,000",
        r"each started cold\): \$[0-9.]+ to \$[0-9.]+ per\nmillion": "each started cold): "
        f"{_money(m.warm_up_dollars(10_000) / 1e-2)} to {_money(m.warm_up_dollars(1000) / 1e-3)}"
        " per\nmillion",
        r"PutItem's 2 write units\), \$[0-9.]+ one POST each": "PutItem's 2 write units), "
        f"{_money(single)} one POST each",
        r"about [0-9.]+ ms of CPU": f"about {m.MEASURED['cpu_per_call'] * 1000:.1f} ms of CPU",
        r"so at most about [0-9,]+ a run": f"so at most about "
        f"{round(m.sweep_moves_a_run(), -5):,.0f} a run",
        r"the API [0-9]+ bytes a batch": "the API "
        f"{logged['api (batches)']['per_invocation']:.0f} bytes a batch",
        r"the starter\n[0-9]+ an invocation": "the starter\n"
        f"{logged['starter']['per_invocation']:.0f} an invocation",
        r"the slot [0-9]+ an invocation and [0-9]+ a message": "the slot "
        f"{logged['slot']['per_invocation']:.0f} an invocation and "
        f"{logged['slot']['per_message']:.0f} a message",
    }
    for pattern, figure in said.items():
        text = re.sub(pattern, lambda _, figure=figure: figure, text)
    return text


def choosing_md(text: str) -> str:
    fired, ten = m.firing_cost(m.SLOT, 10.0), m.all_in(10.0)["total"]
    return re.sub(
        r"at about \$[0-9.]+ per million messages fired at 10 a second, \$[0-9.]+ all in",
        f"at about {_money(fired)} per million messages fired at 10 a second, {_money(ten)} all in",
        text,
    )


def write() -> None:
    for name, rewrite in (("cost.md", cost_md), ("choosing.md", choosing_md)):
        path = DOCS / name
        path.write_text(rewrite(path.read_text()))


if __name__ == "__main__":
    write()
