"""spec-vetting: batch vetting of rare-object candidates in survey spectra with the Spec-o3 agent."""

__version__ = "0.1.0"
