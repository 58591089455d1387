package harness

import (
	"context"

	"github.com/sqlinbox/inbox"
)

// The bench's kinds of job (inbox.Kinds): MaxKinds types, whose kinds are kind_0 to kind_49, so
// that a consumer registers up to MaxKinds kinds (Consumer.Kinds). Written by a script: each
// kind is a Go type of its own, since inbox.Handle takes a kind's name from its type.

// MaxKinds is the most kinds a bench consumer registers.
const MaxKinds = 50

type (
	kind0  struct{}
	kind1  struct{}
	kind2  struct{}
	kind3  struct{}
	kind4  struct{}
	kind5  struct{}
	kind6  struct{}
	kind7  struct{}
	kind8  struct{}
	kind9  struct{}
	kind10 struct{}
	kind11 struct{}
	kind12 struct{}
	kind13 struct{}
	kind14 struct{}
	kind15 struct{}
	kind16 struct{}
	kind17 struct{}
	kind18 struct{}
	kind19 struct{}
	kind20 struct{}
	kind21 struct{}
	kind22 struct{}
	kind23 struct{}
	kind24 struct{}
	kind25 struct{}
	kind26 struct{}
	kind27 struct{}
	kind28 struct{}
	kind29 struct{}
	kind30 struct{}
	kind31 struct{}
	kind32 struct{}
	kind33 struct{}
	kind34 struct{}
	kind35 struct{}
	kind36 struct{}
	kind37 struct{}
	kind38 struct{}
	kind39 struct{}
	kind40 struct{}
	kind41 struct{}
	kind42 struct{}
	kind43 struct{}
	kind44 struct{}
	kind45 struct{}
	kind46 struct{}
	kind47 struct{}
	kind48 struct{}
	kind49 struct{}
)

func (kind0) Kind() string  { return "kind_0" }
func (kind1) Kind() string  { return "kind_1" }
func (kind2) Kind() string  { return "kind_2" }
func (kind3) Kind() string  { return "kind_3" }
func (kind4) Kind() string  { return "kind_4" }
func (kind5) Kind() string  { return "kind_5" }
func (kind6) Kind() string  { return "kind_6" }
func (kind7) Kind() string  { return "kind_7" }
func (kind8) Kind() string  { return "kind_8" }
func (kind9) Kind() string  { return "kind_9" }
func (kind10) Kind() string { return "kind_10" }
func (kind11) Kind() string { return "kind_11" }
func (kind12) Kind() string { return "kind_12" }
func (kind13) Kind() string { return "kind_13" }
func (kind14) Kind() string { return "kind_14" }
func (kind15) Kind() string { return "kind_15" }
func (kind16) Kind() string { return "kind_16" }
func (kind17) Kind() string { return "kind_17" }
func (kind18) Kind() string { return "kind_18" }
func (kind19) Kind() string { return "kind_19" }
func (kind20) Kind() string { return "kind_20" }
func (kind21) Kind() string { return "kind_21" }
func (kind22) Kind() string { return "kind_22" }
func (kind23) Kind() string { return "kind_23" }
func (kind24) Kind() string { return "kind_24" }
func (kind25) Kind() string { return "kind_25" }
func (kind26) Kind() string { return "kind_26" }
func (kind27) Kind() string { return "kind_27" }
func (kind28) Kind() string { return "kind_28" }
func (kind29) Kind() string { return "kind_29" }
func (kind30) Kind() string { return "kind_30" }
func (kind31) Kind() string { return "kind_31" }
func (kind32) Kind() string { return "kind_32" }
func (kind33) Kind() string { return "kind_33" }
func (kind34) Kind() string { return "kind_34" }
func (kind35) Kind() string { return "kind_35" }
func (kind36) Kind() string { return "kind_36" }
func (kind37) Kind() string { return "kind_37" }
func (kind38) Kind() string { return "kind_38" }
func (kind39) Kind() string { return "kind_39" }
func (kind40) Kind() string { return "kind_40" }
func (kind41) Kind() string { return "kind_41" }
func (kind42) Kind() string { return "kind_42" }
func (kind43) Kind() string { return "kind_43" }
func (kind44) Kind() string { return "kind_44" }
func (kind45) Kind() string { return "kind_45" }
func (kind46) Kind() string { return "kind_46" }
func (kind47) Kind() string { return "kind_47" }
func (kind48) Kind() string { return "kind_48" }
func (kind49) Kind() string { return "kind_49" }

// registerKinds registers the first n of the bench's kinds with k, each acking its rows after
// handle has their payload.
func registerKinds(k *inbox.Kinds, n int, handle func([]byte)) {
	regs := []func(){
		func() { register[kind0](k, handle) },
		func() { register[kind1](k, handle) },
		func() { register[kind2](k, handle) },
		func() { register[kind3](k, handle) },
		func() { register[kind4](k, handle) },
		func() { register[kind5](k, handle) },
		func() { register[kind6](k, handle) },
		func() { register[kind7](k, handle) },
		func() { register[kind8](k, handle) },
		func() { register[kind9](k, handle) },
		func() { register[kind10](k, handle) },
		func() { register[kind11](k, handle) },
		func() { register[kind12](k, handle) },
		func() { register[kind13](k, handle) },
		func() { register[kind14](k, handle) },
		func() { register[kind15](k, handle) },
		func() { register[kind16](k, handle) },
		func() { register[kind17](k, handle) },
		func() { register[kind18](k, handle) },
		func() { register[kind19](k, handle) },
		func() { register[kind20](k, handle) },
		func() { register[kind21](k, handle) },
		func() { register[kind22](k, handle) },
		func() { register[kind23](k, handle) },
		func() { register[kind24](k, handle) },
		func() { register[kind25](k, handle) },
		func() { register[kind26](k, handle) },
		func() { register[kind27](k, handle) },
		func() { register[kind28](k, handle) },
		func() { register[kind29](k, handle) },
		func() { register[kind30](k, handle) },
		func() { register[kind31](k, handle) },
		func() { register[kind32](k, handle) },
		func() { register[kind33](k, handle) },
		func() { register[kind34](k, handle) },
		func() { register[kind35](k, handle) },
		func() { register[kind36](k, handle) },
		func() { register[kind37](k, handle) },
		func() { register[kind38](k, handle) },
		func() { register[kind39](k, handle) },
		func() { register[kind40](k, handle) },
		func() { register[kind41](k, handle) },
		func() { register[kind42](k, handle) },
		func() { register[kind43](k, handle) },
		func() { register[kind44](k, handle) },
		func() { register[kind45](k, handle) },
		func() { register[kind46](k, handle) },
		func() { register[kind47](k, handle) },
		func() { register[kind48](k, handle) },
		func() { register[kind49](k, handle) },
	}
	for _, r := range regs[:n] {
		r()
	}
}

func register[A inbox.JobArgs](k *inbox.Kinds, handle func([]byte)) {
	inbox.Handle(k, func(ctx context.Context, d *inbox.Delivery, _ A) error {
		handle(d.Payload)
		return nil
	})
}
