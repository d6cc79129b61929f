"""Token cost of one Dream batch as memory grows, against the old full-rewrite design.

The same 20-entry batch runs against memory/MEMORY.md of about 1, 10, 100 and 500 KB. Dream sees a
large file as its outline plus the sections relevant to the batch and edits sections in place;
the baseline (the old single-stage design) sends the whole file and gets the whole file back.
Every call is counted with the real tokenizer. After each run the facts are checked in their
sections: no fact may be lost at any size.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Section, main

from dream_memory.adapters.history_log import HistoryLog
from dream_memory.adapters.offline import OfflineModel
from dream_memory.adapters.tokens import default_counter
from dream_memory.app.dream import DreamContext, DreamOptions, run_dream
from dream_memory.core.chat import ChatReply, Message, ToolSpec, Usage
from dream_memory.core.markdown import find_section
from dream_memory.testing import FrozenClock, build_workspace

SIZES_KB = (1, 10, 100, 500)
BATCH = [
    *(f"- Decisions: service {i} talks to the queue through adapter {i}." for i in range(1, 8)),
    *(f"- Solutions: timeout {i} was fixed by raising pool size {i}." for i in range(1, 7)),
    *(f"- Environment: worker {i} runs Python 3.1{i} in venv {i}." for i in range(1, 5)),
    "(nothing)",
    "- [ephemeral] asked about lunch",
    "- [skip] thanks",
]
EXPECTED = {
    "Decisions": [f"service {i} talks to the queue" for i in range(1, 8)],
    "Solutions": [f"timeout {i} was fixed" for i in range(1, 7)],
    "Environment": [f"worker {i} runs Python" for i in range(1, 5)],
}


class CountingModel:
    """Wraps the offline engine; counts prompt and completion tokens with the real tokenizer."""

    def __init__(self) -> None:
        self.inner = OfflineModel()
        self.counter = default_counter()
        self.prompt = 0
        self.completion = 0
        self.max_prompt = 0

    @property
    def name(self) -> str:
        return "offline-counted"

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None, purpose: str = ""
    ) -> ChatReply:
        reply = self.inner.complete(messages, tools=tools, purpose=purpose)
        p = sum(self.counter.count(str(m.get("content") or "")) for m in messages)
        p += sum(
            self.counter.count(str(c.get("function", {}).get("arguments", "")))
            for m in messages
            for c in m.get("tool_calls") or []
        )
        c = self.counter.count(reply.content or "") + sum(self.counter.count(t.arguments) for t in reply.tool_calls)
        self.prompt += p
        self.max_prompt = max(self.max_prompt, p)
        self.completion += c
        return ChatReply(reply.content, reply.tool_calls, reply.finish_reason, Usage(p, c, 0.0, 1))


def memory_of(size_kb: int) -> str:
    head = "# Memory\n\nProject facts, decisions and durable context.\n\n"
    core = (
        "## Project Facts\n\n- The product is a ledger.\n\n## Decisions\n\n- Use PostgreSQL.\n\n"
        "## Solutions\n\n- Restart fixes it.\n\n## Environment\n\n- Linux hosts.\n\n"
    )
    body = []
    i = 0
    while len((head + core + "".join(body)).encode()) < size_kb * 1024:
        body.append(
            f"## Archive topic {i}\n\n"
            + "".join(f"- historical note {i}.{j} about subsystem {i}\n" for j in range(20))
            + "\n"
        )
        i += 1
    return head + core + "".join(body)


def run_size(size_kb: int) -> dict[str, object]:
    counter = default_counter()
    with tempfile.TemporaryDirectory(prefix="bench-tokens-") as tmp:
        memory = memory_of(size_kb)
        root = build_workspace(Path(tmp) / "ws", history=BATCH, files={"memory/MEMORY.md": memory})
        model = CountingModel()
        clock = FrozenClock()
        ctx = DreamContext(
            root=root,
            model=model,
            history=HistoryLog(root, clock=clock),
            clock=clock,
            counter=counter,
            options=DreamOptions(),
            open_git=lambda create: __import__("dream_memory.adapters.git", fromlist=["GitStore"]).GitStore.open(
                root, author="bench <b@b>", clock=clock, create=create
            ),
        )
        report = run_dream(ctx)
        assert report.status == "ok", report.to_json()
        after = (root / "memory" / "MEMORY.md").read_text()
        lost = 0
        for title, needles in EXPECTED.items():
            section = find_section(after, title)
            body = section.text if section else ""
            lost += sum(1 for n in needles if n.lower() not in body.lower())
        batch_text = "\n".join(BATCH)
        baseline_prompt = counter.count(memory) + counter.count(batch_text) + 300
        baseline_completion = counter.count(after)
        return {
            "size_kb": len(memory.encode()) / 1024,
            "prompt": model.prompt,
            "max_prompt": model.max_prompt,
            "completion": model.completion,
            "baseline_prompt": baseline_prompt,
            "baseline_completion": baseline_completion,
            "lost": lost,
        }


def run(quick: bool) -> list[Section]:
    sizes = SIZES_KB[:3] if quick else SIZES_KB
    results = [run_size(s) for s in sizes]
    rows = [
        [
            f"{r['size_kb']:.0f} KB",
            r["prompt"],
            r["max_prompt"],
            r["completion"],
            r["baseline_prompt"],
            r["baseline_completion"],
            r["lost"],
        ]
        for r in results
    ]
    first, last = results[0], results[-1]
    det: dict[str, float] = {f"completion_{int(r['size_kb'])}kb": float(r["completion"]) for r in results}  # type: ignore[arg-type]
    det.update({f"prompt_{int(r['size_kb'])}kb": float(r["prompt"]) for r in results})  # type: ignore[arg-type]
    det["facts_lost"] = float(sum(int(r["lost"]) for r in results))  # type: ignore[call-overload]
    growth = int(last["completion"]) / int(first["completion"])  # type: ignore[call-overload]
    # exact (the offline engine), so gated: goal <= 1.1x from 1 KB to 500 KB (issue 21)
    det["completion_growth"] = round(growth, 3)
    return [
        Section(
            key="dream.tokens",
            title="Tokens per 20-entry batch as MEMORY.md grows: Dream vs a full-rewrite baseline",
            columns=[
                "MEMORY.md",
                "Dream prompt (batch)",
                "largest single prompt",
                "Dream completion",
                "rewrite prompt",
                "rewrite completion",
                "facts lost",
            ],
            rows=rows,
            command=f"python bench/bench_tokens.py{' --quick' if quick else ''}",
            notes=[
                f"Dream's completion tokens go from {first['completion']} to {last['completion']} ({growth:.2f}x) "
                f"while the file grows {last['size_kb'] / first['size_kb']:.0f}x; a full rewrite's completion grows "
                "with the file. Prompt tokens are bounded by fileContextTokens per file (default 6000) plus the "
                "batch. A large file's sections shown in the prompt are edited as shown, with no read_file round.",
                "Counted with the cl100k tokenizer on every message sent and every reply; the engine is the offline "
                "engine, so the figures are exact and repeatable.",
            ],
            deterministic=det,
        )
    ]


if __name__ == "__main__":
    main(run)
