#![no_std]
//! Types shared by the kernel programs and user space.
