// Command bmx finds which backend-flag combinations of an LLM inference
// server work on a GPU host: it starts the server once per combination,
// probes it through its OpenAI-compatible API, classifies each combination
// with the evidence that decided it, and writes a compatibility table.
package main

import "os"

func main() {
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}
