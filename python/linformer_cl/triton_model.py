"""The model that Triton's Python backend runs: one instance of a linformer_cl model.

Triton loads this file as the model's model.py (linformer_cl.serve writes it
into the model's repository) and starts one process per instance, each with
its own model object and so its own OpenCL context. The weights lie beside
it in the version folder (model.safetensors); the configuration's parameters
name the devices: instance i takes device i.
"""
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils

import linformer_cl
from linformer_cl import _batching as batching


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {key: value["string_value"] for key, value in config["parameters"].items()}
        # Triton names instances <model>_<group>_<index>; there is one group.
        index = int(args["model_instance_name"].rsplit("_", 1)[1])
        self.selector = params["devices"].split(",")[index]
        heads = int(params["heads_option"]) or None
        weights = os.path.join(args["model_repository"], args["model_version"], "model.safetensors")
        self.model = linformer_cl.load(weights, device=self.selector or None, heads=heads)
        self.input = "tokens" if self.model.info.takes_tokens else "x"
        # Triton's Python backend (2.51) reports one outcome for all the
        # requests of an execute() call: a success when it returns, error
        # responses included, a failure when it raises, and then every request
        # of the call, the good ones of a ragged batch too, gets a 500. So a
        # bad request is answered by its own error response (400) and counted
        # here, on the same metrics endpoint. (The family must outlive its metric.)
        self.family = pb_utils.MetricFamily(name="linformer_request_rejected", kind=pb_utils.MetricFamily.COUNTER,
                                       description="Requests the model answered with an error naming their input's "
                                                   "problem (HTTP 400), counted in nv_inference_request_success too; "
                                                   "those Triton refuses before the model are in neither")
        self.rejected = self.family.Metric(labels={"model": args["model_name"], "version": args["model_version"]})

    def execute(self, requests):
        arrays = [pb_utils.get_input_tensor_by_name(r, self.input).as_numpy() for r in requests]
        problems = [batching.request_problem(a, self.model.info) for a in arrays]
        errors = {i: bad_input(p) for i, p in enumerate(problems) if p is not None}
        good = [i for i in range(len(requests)) if i not in errors]
        outputs = {}
        if good:
            try:
                outputs = dict(zip(good, batching.forward_padded(self.model, [arrays[i] for i in good])))
            except linformer_cl.ArgumentError as e:
                errors.update((i, bad_input(str(e))) for i in good)
            except linformer_cl.Error as e:  # the device's failure, not the requests'
                errors.update((i, pb_utils.TritonError(str(e))) for i in good)
        self.rejected.increment(sum(e.code() == pb_utils.TritonError.INVALID_ARG for e in errors.values()))
        return [pb_utils.InferenceResponse(error=errors[i]) if i in errors else self._answer(arrays[i], outputs[i])
                for i in range(len(requests))]

    def _answer(self, array, y):
        # Which device answered, one per sequence: a client can check against it.
        device = np.full((array.shape[0], 1), self.selector.encode(), dtype=object)
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("y", np.ascontiguousarray(y)),
                                                          pb_utils.Tensor("device", device)])

    def finalize(self):
        self.model.close()


def bad_input(problem):
    """An error response's error for a request the model cannot run (HTTP 400, gRPC INVALID_ARGUMENT)."""
    return pb_utils.TritonError(problem, pb_utils.TritonError.INVALID_ARG)
