"""Evaluating trained policies: reading one from a run folder, a checkpoint or an ONNX file
(``policies``), and the full-clip tracking evaluation of ``unilab-eval`` and of periodic evaluation
in training (``tracking``, over the metric functions of ``metrics``)."""
