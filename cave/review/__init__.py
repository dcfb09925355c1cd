"""What stands between an answer and ``success``: the review of an answer before it ends a run.

- ``checks``: the task's own checks on its outputs (declared in a task file or ``Agent(checks=...)``).
- the holds an answer goes through before it is accepted (``acceptance`` and the modules it calls), and the
  notes the model reads after a step (``feedback``, ``failure_notes``, ``recovery``, ``guard``).
"""
