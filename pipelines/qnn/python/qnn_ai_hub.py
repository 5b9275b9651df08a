"""Compile a QDQ ONNX model into a QNN context binary with a Qualcomm AI Hub compile job.

    python qnn_ai_hub.py --onnx model.onnx --device "Samsung Galaxy S24 (Family)" --seq-len 256
                         --out model.bin [--timeout 1800]

NOT RUN by edgepipe's own tests or CI: it needs a Qualcomm AI Hub account. Credentials come
from QAI_HUB_API_TOKEN (passed as qai_hub.ClientConfig(api_token=...)) or from the
client.ini that `qai-hub configure --api_token TOKEN` writes (~/.qai_hub/client.ini, or
QAIHUB_CLIENT_INI). Without either it exits 2 at once, before any network call.

The job is the documented one: qai_hub.submit_compile_job(model, device=qai_hub.Device(NAME),
input_specs={input: ((1, seq_len), "int64")}, options="--target_runtime qnn_context_binary"),
then job.wait(timeout) and job.download_target_model(out). The QDQ model's quantization
encodings are kept by the compiler (no calibration data is sent).

Its report is report() below (reports/qnn_ai_hub.json).
"""

import argparse
import os
import sys

import edgepipe_report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--device", required=True, help="Qualcomm AI Hub device name (qai-hub list-devices)")
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--out", required=True, help="where to write the context binary")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds to wait for the job")
    args = ap.parse_args()

    token = os.environ.get("QAI_HUB_API_TOKEN", "")
    ini = os.path.expanduser(os.environ.get("QAIHUB_CLIENT_INI", "~/.qai_hub/client.ini"))
    if not token and not os.path.exists(ini):
        print("qnn_ai_hub: no Qualcomm AI Hub API token: set QAI_HUB_API_TOKEN or run "
              "`qai-hub configure --api_token TOKEN`", file=sys.stderr)
        return 2

    import onnx
    import qai_hub as hub

    client = hub.Client(config=hub.ClientConfig(api_token=token)) if token else hub.Client()
    graph = onnx.load(args.onnx, load_external_data=False).graph
    input_specs = {i.name: ((1, args.seq_len), "int64") for i in graph.input}
    job = client.submit_compile_job(
        model=args.onnx,
        device=hub.Device(args.device),
        input_specs=input_specs,
        options="--target_runtime qnn_context_binary",
        name=os.path.basename(os.path.dirname(os.path.abspath(args.onnx))) or "edgepipe",
    )
    print(f"qnn_ai_hub: submitted compile job {job.job_id} for {args.device}", file=sys.stderr, flush=True)
    status = job.wait(timeout=args.timeout)
    if not status.success:
        print(f"qnn_ai_hub: compile job {job.job_id} ended {status.code}: {status.message}", file=sys.stderr)
        return 1
    job.download_target_model(args.out)
    edgepipe_report.emit(report(job.job_id, "qnn_context_binary", args.device, str(status.code)))
    return 0


def report(job_id, target_runtime, device, status):
    return {"job_id": job_id, "target_runtime": target_runtime, "device": device, "status": status}


if __name__ == "__main__":
    sys.exit(main())
