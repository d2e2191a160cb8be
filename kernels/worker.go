package kernels

import "embed"

// The GPU worker is C++/CUDA source that evotune carries and builds on the
// machine with the GPU, with that machine's nvcc, like the candidates.
//
//go:embed worker.cu sdpa_params.h
var workerFiles embed.FS

// WorkerSource returns the GPU worker's embedded sources: worker.cu, which
// nvcc compiles, and the sdpa_params.h it includes. Its Hash names the
// worker build in caches.
func WorkerSource() Source {
	files := map[string][]byte{}
	for _, n := range []string{"worker.cu", "sdpa_params.h"} {
		b, err := workerFiles.ReadFile(n)
		if err != nil {
			panic("kernels: embedded file missing: " + n) // go:embed guarantees it
		}
		files[n] = b
	}
	return Source{Name: "worker.cu", Files: files, Hash: hashFiles(files)}
}
