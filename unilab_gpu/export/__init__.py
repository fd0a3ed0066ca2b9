"""Deployment export: the deterministic actor as ONNX with the metadata a robot needs, and its
check in MuJoCo C (sim-to-sim).

Map:
    policy      deterministic_policy(agent): actor + observation normaliser as one torch module
    metadata    deployment_metadata(env, ...): joints, defaults, action map, PD gains, dt, obs layout
    onnx_policy export_onnx, read_metadata, OnnxPolicy (onnxruntime rollout)
    export_run  export_agent, export_checkpoint: a run's policy to a file
    upgrade     upgrade_policy_file(path): an older file's metadata to the current version, the network untouched
    sim2sim     Scenario, sim2sim(): an exported file run in MuJoCo C (unilab-sim2sim); scenario, run, report
"""
