"""Pages → samples: the text exposition parsers and what each known page means
(engine profiles, dcgm-exporter, node_exporter, npu-exporter, histograms, engine info)."""
