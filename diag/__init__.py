"""diag: find out why a GPU inference program is slow, and what to change.

The public API a target may use (all optional; diag works with no code change):

    import diag
    with diag.request():        # one request, arrival to completion
        with diag.stage("preprocess"):
            ...

Outside `diag profile` these calls cost almost nothing and record nothing.
"""

from diag.api import request, stage

__version__ = "0.1.0"
__all__ = ["request", "stage", "__version__"]
