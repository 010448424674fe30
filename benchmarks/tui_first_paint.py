"""First paint of `diag tui` on a 1-hour synthetic run (target: < 1.5 s).

    .venv/bin/python benchmarks/tui_first_paint.py [--duration 3600] [--run DIR]

Times, from the moment `diag tui RUN` would start building the app:
- open: open_run + app construction;
- first paint: the first screen drawn: tabs, footer, the Overview's run line
  (command, duration, GPU) and a "Diagnosing…" banner;
- verdict: the Overview complete (diagnose() included: most of the time);
- then every other view's load-and-show when first opened.
Then the same with the diagnosis handed in, as `diag profile --tui` does.
Runs headless (Textual's run_test) at 100x30; imports are timed apart.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time


async def measure(path: str, size: tuple[int, int], diagnosis=None, views: bool = True) -> dict[str, float]:  # noqa: ANN001
    from diag.tui import make_app
    from diag.tui.app import VIEWS

    t0 = time.perf_counter()
    app = make_app(path, diagnosis)
    app.animation_level = "none"
    out: dict[str, float] = {"open": time.perf_counter() - t0}
    display = app._display

    def spy(screen, renderable) -> None:  # noqa: ANN001
        # The first frame handed to the terminal that holds the Overview's run line.
        if renderable is not None and "first paint" not in out and screen.query("#run-line"):
            out["first paint"] = time.perf_counter() - t0
        display(screen, renderable)

    app._display = spy
    async with app.run_test(size=size) as pilot:
        while "first paint" not in out:
            await pilot.pause(0.005)
        while not app.current_view().ready:
            await pilot.pause(0.005)
        await pilot.pause()  # the Overview's widgets laid out and drawn
        out["verdict"] = time.perf_counter() - t0
        for i, view in enumerate(VIEWS[1:] if views else (), 2):
            t = time.perf_counter()
            await pilot.press(str(i))
            while not app.current_view().ready:
                await pilot.pause(0.005)
            await pilot.pause()
            out[f"open {view.TITLE}"] = time.perf_counter() - t
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3600.0)
    parser.add_argument("--scenario", default="gpu_compute")
    parser.add_argument("--run", help="an existing run directory (default: write a synthetic one)")
    args = parser.parse_args()

    # Import cost is paid once per process in real use too; count it separately.
    t = time.perf_counter()
    import diag.engine  # noqa: F401
    import diag.tui  # noqa: F401
    imports = time.perf_counter() - t

    with tempfile.TemporaryDirectory() as tmp:
        path = args.run
        if not path:
            from diag.synthetic import write_synthetic_run

            path = os.path.join(tmp, "run")
            t = time.perf_counter()
            write_synthetic_run(path, args.duration, args.scenario)
            print(f"wrote a {args.duration:.0f} s {args.scenario} run in {time.perf_counter() - t:.1f} s")
        result = asyncio.run(measure(path, (100, 30)))
        from diag.engine import diagnose
        from diag.store.run import open_run

        handed = asyncio.run(measure(path, (100, 30), diagnose(open_run(path)), views=False))

    print(f"{'imports (diag.tui, diag.engine)':34} {imports:6.2f} s")
    print("diag tui RUN:")
    for name, secs in result.items():
        print(f"  {name:32} {secs:6.2f} s")
    print("diag profile --tui (diagnosis handed in):")
    for name, secs in handed.items():
        print(f"  {name:32} {secs:6.2f} s")
    ok = result["first paint"] < 1.5
    print(f"first paint {'<' if ok else '>='} 1.5 s: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
