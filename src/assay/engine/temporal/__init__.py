"""The Temporal executor: the same run graph as a workflow, every effect an activity.

``workflow`` runs :func:`assay.engine.graph.run.run_graph` with :class:`TemporalEffects`
(``effects``), whose methods are activities; ``activities`` performs them on a worker with the
local executor's effects; ``worker`` runs a worker process; ``client`` submits and stops runs.
A run's seats live on the worker that opened it: ``open`` runs on the shared task queue and
returns that worker's own queue, and every later activity of the run goes there.
"""
