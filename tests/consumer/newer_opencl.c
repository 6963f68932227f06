/* An application that includes linformer.h before CL/cl.h, without choosing
 * an OpenCL target, still sees the OpenCL 2.0+ declarations the OpenCL
 * headers give by default: linformer.h must not narrow them. Compiled with
 * -Werror; it need not run (no device is asked for). */
#include <linformer.h>
#include <CL/cl.h>

cl_command_queue newer_queue(cl_context context, cl_device_id device)
{
    cl_int err = CL_SUCCESS;
    return clCreateCommandQueueWithProperties(context, device, NULL, &err);
}
