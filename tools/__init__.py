"""settle's commands around the runtime services: local infrastructure, run and demo,
invariant check, chaos runs, benchmarks, and the `settle` console script."""
