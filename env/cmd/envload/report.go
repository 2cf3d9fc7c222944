package main

import (
	"fmt"
	"io"
	"time"
)

// result is one run's figures. Zero /proc figures mean "not measured"
// (an -addr server without -pid).
type result struct {
	cfg       config
	loadAvg   float64 // 1-minute load average when the run began
	cpus      int
	serverPID int

	opened, failed, lost int
	failErr, lostErr     error

	steps, resets int
	elapsed       time.Duration
	lat           latencyStats
	serverCPU     time.Duration // user+system, during the load
	clientCPU     time.Duration // this process's, during the load

	rssBase, rssIdle, rssIdleAsFound int64
	before, idle                     childStats // from a started server only
}

// perSession divides the growth from base to v by the open sessions.
func (r *result) perSession(v, base int64) float64 {
	return float64(v-base) / float64(r.opened)
}

// write prints the report.
func (r *result) write(w io.Writer) {
	c := r.cfg
	server := fmt.Sprintf("server child pid %d", r.serverPID)
	if c.addr != "" {
		server = "server at " + c.addr
	}
	mode := "closed loop (no think time)"
	if c.think > 0 {
		mode = fmt.Sprintf("think time %s between requests", c.think)
	}
	fmt.Fprintf(w, "envload: env %s, %d sessions, %s, %s, %s\n", c.env, c.sessions, c.duration, mode, server)
	fmt.Fprintf(w, "machine: %d CPUs, load average %.2f at start\n", r.cpus, r.loadAvg)
	fmt.Fprintf(w, "sessions: %d opened, %d failed, %d lost\n", r.opened, r.failed, r.lost)
	if r.failErr != nil {
		fmt.Fprintf(w, "  failed: %v\n", r.failErr)
	}
	if r.lostErr != nil {
		fmt.Fprintf(w, "  lost: %v\n", r.lostErr)
	}
	secs := r.elapsed.Seconds()
	fmt.Fprintf(w, "steps: %d in %.2fs = %.0f steps/s (+ %d resets)\n", r.steps, secs, float64(r.steps)/secs, r.resets)
	fmt.Fprintf(w, "step latency: p50 %s, p99 %s, max %s\n", round(r.lat.p50), round(r.lat.p99), round(r.lat.max))
	if r.serverPID > 0 && r.steps+r.resets > 0 {
		perReq := r.serverCPU / time.Duration(r.steps+r.resets)
		fmt.Fprintf(w, "server CPU: %.2fs = %s per request (steps and resets; GC and pings included), %.2f cores busy\n",
			r.serverCPU.Seconds(), round(perReq), r.serverCPU.Seconds()/secs)
	}
	if r.steps+r.resets > 0 {
		fmt.Fprintf(w, "load generator CPU: %.2fs = %s per request\n", r.clientCPU.Seconds(), round(r.clientCPU/time.Duration(r.steps+r.resets)))
	}
	if r.serverPID > 0 && r.opened > 0 {
		fmt.Fprintf(w, "server RSS: %.1f MiB with no session; idle with %d sessions: %.1f KiB/session as found",
			float64(r.rssBase)/(1<<20), r.opened, r.perSession(r.rssIdleAsFound, r.rssBase)/1024)
		if r.rssIdle > 0 {
			fmt.Fprintf(w, ", %.1f KiB/session after GC", r.perSession(r.rssIdle, r.rssBase)/1024)
		}
		fmt.Fprintln(w)
	}
	if r.idle.goroutines > 0 {
		fmt.Fprintf(w, "server per idle session: %.2f goroutines, %.1f KiB heap, %.1f KiB stack\n",
			float64(r.idle.goroutines-r.before.goroutines)/float64(r.opened),
			r.perSession(r.idle.heapInuse, r.before.heapInuse)/1024,
			r.perSession(r.idle.stackInuse, r.before.stackInuse)/1024)
	}
}

// round shortens a duration for the report.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(100 * time.Nanosecond)
}
