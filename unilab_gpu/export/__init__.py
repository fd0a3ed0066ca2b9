"""Deployment export: the deterministic actor as ONNX with the metadata a robot needs.

Map:
    policy      deterministic_policy(agent): actor + observation normaliser as one torch module
    metadata    deployment_metadata(env, ...): joints, defaults, action map, PD gains, dt, obs layout
    onnx_policy export_onnx, read_metadata, OnnxPolicy (onnxruntime rollout)
"""
