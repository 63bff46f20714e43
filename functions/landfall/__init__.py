"""Landfall: event-driven TensorFlow training on Google Cloud.

The package lives inside ``functions/`` so that folder deploys as a Cloud Function as it is;
the trainer image and the ``landfall`` command install the same package from the repository.
"""

__version__ = "0.1.0"
