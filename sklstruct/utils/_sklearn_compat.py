"""The one place where private scikit-learn helpers are imported."""

from sklearn.base import _fit_context  # noqa: F401
from sklearn.utils._param_validation import Interval, StrOptions  # noqa: F401
from sklearn.utils.validation import validate_data  # noqa: F401
