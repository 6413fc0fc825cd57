"""The one place where private scikit-learn helpers are imported."""

from sklearn.base import _fit_context  # noqa: F401
from sklearn.utils._param_validation import Interval, StrOptions, validate_params  # noqa: F401
from sklearn.utils.metadata_routing import _MetadataRequester  # noqa: F401
from sklearn.utils.validation import (  # noqa: F401
    _check_feature_names,
    _check_n_features,
    _get_feature_names,
    _num_samples,
    validate_data,
)
