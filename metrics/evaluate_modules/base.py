"""What every `evaluate` metric script under metrics/evaluate_modules/<name>/ shares: the module info, the one input
column (a JSON string per stored measurement), the parsing of those lines, and each benchmark's citation.

A script subclasses its benchmark's base (`MPEMetric`, `M3Metric`, `IFEvalMetric`) and keeps only its own text and
its `_compute`:

    class FreshOnsetRate(MPEMetric):
        DESCRIPTION = _DESCRIPTION                # what the number means
        KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION  # its arguments and what it returns

        def _compute(self, measurements: list[str], ...) -> dict[str, Any]:
            return headline(self.records(measurements), ...)

A script imports one name from here: evaluate reads a script line by line to find the packages it needs, so the
scripts keep one import per line and no comma imports. `evaluate.load` picks the first non-abstract
`evaluate.Metric` subclass in the script's namespace; the bases here are abstract (their `_compute` is), so the
script's own class is the one loaded.
`duplex-eval push-metric` copies this file into the Space with the rest of the code the script imports.
"""

from __future__ import annotations

import abc
import inspect
import json
from typing import Any, ClassVar

import datasets
import evaluate
from evaluate.utils.file_utils import add_start_docstrings

MPE_CITATION = """\
@misc{duplex_mpe,
  title = {Duplex-MPE: Benchmarking Multi-Party Interaction in Full-Duplex Dialogue}
}
"""

M3_CITATION = """\
@misc{m3_duplexbench,
  title = {M3-DuplexBench: A Multi-Turn, Multilingual, Multidomain Benchmark for Full-Duplex Spoken Dialogue Models},
  eprint = {2607.29125},
  archivePrefix = {arXiv},
  url = {https://arxiv.org/abs/2607.29125}
}
"""

IFEVAL_CITATION = """\
@misc{dsb_ifeval,
  title = {DuplexSpeechBench-IFEval: Evaluating Implicit Instruction Following in Full-Duplex Voice Agents},
  eprint = {2609.03423},
  archivePrefix = {arXiv},
  url = {https://arxiv.org/abs/2609.03423}
}
"""


class MeasurementsMetric(evaluate.Metric, metaclass=abc.ABCMeta):
    """An `evaluate` metric over the lines of a run's measurements.jsonl (what `duplex-eval score` writes)."""

    DESCRIPTION: ClassVar[str]
    CITATION: ClassVar[str]
    KWARGS_DESCRIPTION: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not inspect.isabstract(cls):  # the docstring evaluate's own metrics get from add_start_docstrings
            add_start_docstrings(cls.DESCRIPTION, cls.KWARGS_DESCRIPTION)(cls)

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=self.DESCRIPTION,
            citation=self.CITATION,
            inputs_description=self.KWARGS_DESCRIPTION,
            # One JSON string per window, case or episode: the records are nested (spans, timings, judge verdicts)
            # and differ by kind, which a flat Arrow schema cannot hold without inventing nullable columns for
            # every field.
            features=datasets.Features({"measurements": datasets.Value("string")}),
        )

    @abc.abstractmethod
    def _compute(self, measurements: list[str], **kwargs: Any) -> dict[str, Any]:
        """The script's numbers from the measurement lines; keyword arguments are its thresholds or rules."""

    @staticmethod
    def records(measurements: list[str]) -> list[dict[str, Any]]:
        """The measurement records of measurements.jsonl lines."""
        return [json.loads(m) for m in measurements]


class MPEMetric(MeasurementsMetric):
    """A Duplex-MPE score over stored window measurements."""

    CITATION = MPE_CITATION


class M3Metric(MeasurementsMetric):
    """An M3-DuplexBench score over stored episode measurements."""

    CITATION = M3_CITATION


class IFEvalMetric(MeasurementsMetric):
    """A DSB-IFEval score over stored case measurements."""

    CITATION = IFEVAL_CITATION
