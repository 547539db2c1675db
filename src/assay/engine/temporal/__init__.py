"""The Temporal executor: the same run graph as a workflow, every effect an activity.

``table`` lists the activities (each effect's name, call, result, timeout and queue); from it
``effects`` makes the workflow's calls (:class:`TemporalEffects`, which ``workflow`` runs
:func:`assay.engine.graph.run.run_graph` with) and ``holding`` the worker's activities, performed
with the local executor's effects; ``activities`` opens and closes runs against the ledger;
``worker`` runs a worker process; ``client`` submits and stops runs. A run's seats live on
the worker that opened it: ``open`` runs on the shared task queue and returns that worker's
own queue, and every later activity of the run goes there.
"""
