"""pytest's hooks and the fixtures every test file may use. The helpers the tests import are in helpers/."""

import pytest
from helpers.gpu import selects_gpu

# The quick tier, `python -m pytest -m "not slow"` (minutes on 2 cores): every script's short run (CleanRL's own
# smoke-test command lines on every file, and each algorithm's short runs), the fast files' updates against the
# baselines', the errors of mistyped flags, and the checks of the files and the pages. Everything else is marked
# slow: the long runs, resume and stop, Ray, torchrun, Slurm, run.sh, evaluation and video, and whatever compiles.
QUICK_MODULES = {
    "test_files",
    "test_docs",
    "test_readme",
    "test_plumbing",
    "test_ppo_parity",
    "test_network_classes",
    "test_adam_settings",
    "test_gpu_selection_and_sync_count",
    "test_cleanrl_commands",
    "test_graph_capture",
}
QUICK_TESTS = {  # in the algorithms' own files: their short runs, bad input, parity with the baseline
    "test_short_run",
    "test_bad_input",
    "test_bad_input_checks",
    "test_bad_input_cli",
    "test_bad_input_fails_with_one_line",
    "test_fast_update_equals_cleanrl_update",
    "test_fast_rollout_matches_baseline",
    "test_fast_agent_matches_baseline_distribution",
    "test_gae_matches_reference",
    "test_gae_against_reference",
    "test_baseline_run",
    "test_fast_run",
    "test_the_cut_of_a_small_file",
    "test_the_stripped_file_is_clean_and_every_flag_does_something",
    "test_the_command_s_errors_are_one_line",
    "test_micro_times_the_scripts_own_functions",
    "test_the_doc_tools_refuse_bad_input_in_one_line",
    "test_suite_keeps_the_other_tier_s_row",
}


def pytest_configure(config):
    # Asked for the GPU tests where there is no GPU: say so and run nothing, here, before pytest-xdist's workers start
    # (an error raised in a worker's collection crashes it: an INTERNALERROR, not this line).
    if selects_gpu(config.option.markexpr):
        import torch

        if not torch.cuda.is_available():
            raise pytest.UsageError(f"-m {config.option.markexpr!r} selects the gpu tests, but CUDA is not available here")


def pytest_collection_modifyitems(config, items):
    import torch

    slow = pytest.mark.slow
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        quick = module in QUICK_MODULES or item.originalname in QUICK_TESTS
        if not quick or "compile" in item.keywords:
            item.add_marker(slow)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """A test that runs a script's main() in this process leaves torch's thread count as it found it (the fast DQN
    sets one thread on a CPU)."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def inductor_eager_rng():
    """Compiled code draws its random numbers as eager code does, so that the two paths can be compared exactly."""
    import torch._inductor.config as cfg

    old, cfg.fallback_random = cfg.fallback_random, True
    yield
    cfg.fallback_random = old
