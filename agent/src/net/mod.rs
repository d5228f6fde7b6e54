//! The transparent proxy: connections the kernel hooks sent here, by their original
//! destination. So far its TLS parts ([`tls`]): the ClientHello read in place, termination
//! with the session's CA, and upstream TLS to the original address.

pub mod tls;
