"""The two tasks, by name in Python and by integer code inside numba kernels."""

from __future__ import annotations

__all__ = ["CLASSIFICATION", "CLASSIFICATION_CODE", "REGRESSION", "REGRESSION_CODE", "TASKS",
           "task_code"]

REGRESSION = "regression"
CLASSIFICATION = "classification"
TASKS = (REGRESSION, CLASSIFICATION)

#: Integer codes of the tasks in numba kernels (which branch on an int, not a str).
REGRESSION_CODE = 0
CLASSIFICATION_CODE = 1


def task_code(task: str) -> int:
    """The kernel code of a task name.

    Examples
    --------
    >>> task_code("classification")
    1
    """
    if task == REGRESSION:
        return REGRESSION_CODE
    if task == CLASSIFICATION:
        return CLASSIFICATION_CODE
    raise ValueError(f"task must be {REGRESSION!r} or {CLASSIFICATION!r}; got {task!r}.")
