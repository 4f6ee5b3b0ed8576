"""The emulated engines: what executes the packets of `hcqsim.pm4` and `hcqsim.sdma` on an `EmulatedGPU`.

`queue` is what every user-mode queue shares (ring, pointers, indirect buffers, waits);
`command_processor` executes PM4 compute queues and hands DISPATCH_DIRECT to the shader core as a
`dispatch.Dispatch`; `sdma_engine` executes SDMA queues. Nothing here is imported by the runtime, and nothing
here imports `hcqsim.gpu`: a queue is given its GPU at construction and uses only what `host.EngineHost` lists.
"""
