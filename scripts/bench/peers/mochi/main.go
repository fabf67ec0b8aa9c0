// mochi-peer: the mochi-mqtt broker as a benchmark peer for RingMQ's scenario suite.
// One TCP listener on the address given (loopback only), anonymous access, and the
// per-client queue limits raised so the broker is not handicapped by its defaults.
package main

import (
	"flag"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:1883", "TCP listen address")
	flag.Parse()

	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumClientWritesPending = 65536
	caps.MaximumInflight = 65535
	caps.ReceiveMaximum = 65535
	server := mqtt.New(&mqtt.Options{
		Capabilities: caps,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err := server.AddHook(new(auth.AllowHook), nil); err != nil {
		log.Fatal(err)
	}
	if err := server.AddListener(listeners.NewTCP(listeners.Config{ID: "t1", Address: *addr})); err != nil {
		log.Fatal(err)
	}
	if err := server.Serve(); err != nil {
		log.Fatal(err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	<-sigs
	_ = server.Close()
}
