"""Live capture: recording proxy (proxy.py), opencode driver (agent.py), vLLM backends
(backends.py, hf_jobs.py), tasks and reward, and one capture as a job (job.py).

Nothing here imports gradio; the Capture tab (viewer/ui/capture_tab.py) drives
:mod:`viewer.capture.runner`.
"""
