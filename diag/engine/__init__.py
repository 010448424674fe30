"""Engine: rules over metrics -> a Diagnosis. `from diag.engine import diagnose`."""

from diag.engine.diagnose import diagnose
from diag.engine.diagnosis import Diagnosis

__all__ = ["Diagnosis", "diagnose"]
