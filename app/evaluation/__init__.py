"""The evaluation harness behind ``facet eval``: loaders, metrics, tasks, cache, runner."""
