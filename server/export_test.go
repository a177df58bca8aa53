package server

import "time"

// SetMinCallbackWait sets the least a writer waits for a watch's
// acknowledgement (minCallbackWait) in cfg.
func SetMinCallbackWait(cfg *Config, d time.Duration) { cfg.minCallbackWait = d }

// ConnCost is what a connection costs the server's memory.
const ConnCost = connCost
