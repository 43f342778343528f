"""Reactivex-shaped operators over run events (``Observable -> Observable``).

Arguments are checked when the operator is built, before anyone subscribes.
"""

from ._budget_watch import budget_watch
from ._coalesce_progress import coalesce_progress
from ._for_run import for_run
from ._of_type import of_type
from ._until_finished import until_finished

__all__ = ["budget_watch", "coalesce_progress", "for_run", "of_type", "until_finished"]
