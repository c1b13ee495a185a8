"""The Trainer run as N replicas: a Kubeflow Training Operator TFJob (open-source KFP) or TFX's
Vertex AI Trainer extension (worker_pool_specs), each replica running TFX's Trainer executor
with TF_CONFIG. See docs/kubeflow.md, "Trainer replicas"."""
