"""The learning page's curves, every seed of a file together: for each algorithm of the page's runs (tools/tables.py's
LEARNING_RUNS), a panel per file and flags with each seed's episodic return (the mean of its last 20 episodes) against
steps, the mean of its finished seeds' curves, and CleanRL's points and final mean ± std (doc/results/cleanrl_reference.csv).

The seeds of one file may lie in several results folders (run at other times, on other machines): each seed is read
from its folder's results.csv and its curve from that folder's curves.csv (run.sh --publish copies it). A folder
published before run.sh wrote curves.csv has its seeds' final returns alone: each is drawn as a point at the step it
reached, and left out of the mean. A file none of whose folders has a curves.csv gets no panel (its returns are in
the page's tables), and an algorithm without a panel no figure.

    python tools/curves.py            # writes doc/results/learning_<algorithm>.png
"""

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from helpers.scripts import load_tool  # noqa: E402

tables = load_tool(ROOT / "tools" / "tables.py")  # the learning page's runs, and its reader of results files
aggregate = load_tool(ROOT / "tools" / "aggregate.py")  # the reference's reader and its points on a panel
RESULTS = ROOT / "doc" / "results"
MEAN_POINTS = 200  # the mean's steps: evenly spaced over the steps every finished seed's curve covers


def seeds_of(results, folders, algorithm, variant, exp):
    """A file's seeds across its results folders, in the folders' order: for each, its folder, seed, status, the step it
    reached, its final return and its curve ((steps, returns) from curves.csv, or None where the folder has none)."""
    seeds = []
    for folder in folders:
        path = results / folder / "curves.csv"
        curves = tables.read_csv(path) if path.is_file() else None
        for row in tables.read_csv(results / folder / "results.csv"):
            if (row["algorithm"], row["variant"]) != (algorithm, variant) or not row["episodic_return"]:
                continue
            if exp is not None and row["exp_name"] != exp:
                continue
            curve = None
            if curves is not None:
                key = (row["algorithm"], row["variant"], row["exp_name"], row["env_id"], row["seed"])
                points = [r for r in curves if (r["algorithm"], r["variant"], r["exp_name"], r["env_id"], r["seed"]) == key]
                if points:
                    curve = ([int(r["global_step"]) for r in points], [float(r["episodic_return"]) for r in points])
            seeds.append(
                {
                    "folder": folder,
                    "seed": int(row["seed"]),
                    "status": row["status"],
                    "env_id": row["env_id"],
                    "step": int(row["global_step"]),
                    "final": float(row["episodic_return"]),
                    "curve": curve,
                }
            )
    return seeds


def seed_mean(curves, points=MEAN_POINTS):
    """The mean of curves ((steps, returns) each), each interpolated linearly onto the same steps: evenly spaced from
    the latest of their first steps to the earliest of their last, so that every curve counts at every step."""
    import numpy as np

    start = max(steps[0] for steps, _ in curves)
    stop = min(steps[-1] for steps, _ in curves)
    grid = np.linspace(start, stop, points)
    return grid, np.mean([np.interp(grid, steps, returns) for steps, returns in curves], axis=0)


def draw(algorithm, panels, reference, path):
    """One figure: a panel per (title, seeds) of panels, with the reference's points for the seeds' env id."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 4.2 * len(panels)), layout="tight", squeeze=False)
    for axis, (title, seeds) in zip(axes[:, 0], panels):
        for i, s in enumerate(seeds):
            label = f"seed {s['seed']} ({s['folder']})"
            if s["status"] != "finished":
                label += f", {s['status']} at {s['step']:,}"
            if s["curve"] is None:
                axis.plot(s["step"], s["final"], "D", color=f"C{i}", ms=7, label=label + ": final return only")
            else:
                axis.plot(*s["curve"], color=f"C{i}", lw=1, alpha=0.7, label=label)
        finished = [s for s in seeds if s["curve"] and s["status"] == "finished"]
        if len(finished) > 1:
            grid, mean = seed_mean([s["curve"] for s in finished])
            names = ", ".join(str(s["seed"]) for s in finished)
            axis.plot(grid, mean, color="navy", lw=2.5, label=f"mean of seeds {names}")
        aggregate.reference_panel(axis, aggregate.reference_for(reference, algorithm, seeds[0]["env_id"]))
        axis.set(title=title, xlabel="environment steps", ylabel="episodic return (last 20 episodes)")
        axis.title.set_fontsize(9)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    reference = aggregate.read_reference(RESULTS / "cleanrl_reference.csv")
    by_algorithm = {}
    for name, folder, algorithm, variant, exp, shown in tables.LEARNING_RUNS:
        seeds = seeds_of(RESULTS, tables.folders_of(folder), algorithm, variant, exp)
        if any(s["curve"] for s in seeds):
            by_algorithm.setdefault(algorithm, []).append((f"{name}: {shown}", seeds))
    for algorithm, panels in by_algorithm.items():
        path = RESULTS / f"learning_{algorithm}.png"
        draw(algorithm, panels, reference, path)
        print(f"curves.py: {path.relative_to(ROOT)} written")


if __name__ == "__main__":
    main()
