"""Survey spectrum readers (LAMOST LRS, SDSS, DESI): sniff by content, return :class:`~spec_vetting.Spectrum`."""

from .reader import iter_spectra, list_targets, parse_target, read_spectrum, sniff_layout
from .registry import SkippedTarget, known_layouts

__all__ = ["iter_spectra", "list_targets", "parse_target", "read_spectrum", "sniff_layout", "SkippedTarget",
           "known_layouts"]
