// Package broker owns the domain of the service broker: service instances,
// bindings and the operations that change them, their states, the OSB error
// codes, and the ports the broker needs from the outside world (Store, Engine,
// Driver). It knows nothing of HTTP or AWS; adapters live in packages named
// after what they adapt to.
package broker
