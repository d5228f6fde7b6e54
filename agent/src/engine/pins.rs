//! Where pins and approvals live: the state dir's pin store, or this process's memory when
//! there is none (the standalone shim without `--state-dir`: rug pulls are then caught within
//! one run only).

use std::collections::HashMap;
use std::sync::Mutex;

use super::lock;
use crate::store::{Approval, PinStore, StoreError, ToolPin};

pub(super) enum Pins {
    Store(PinStore),
    Memory(Mutex<Memory>),
}

#[derive(Default)]
pub(super) struct Memory {
    pins: HashMap<(String, String), ToolPin>,
    approvals: HashMap<(String, String), Approval>,
}

fn key(server: &str, tool: &str) -> (String, String) {
    (server.to_owned(), tool.to_owned())
}

impl Pins {
    pub fn new(store: Option<PinStore>) -> Self {
        match store {
            Some(store) => Self::Store(store),
            None => Self::Memory(Mutex::default()),
        }
    }

    pub fn store(&self) -> Option<&PinStore> {
        match self {
            Self::Store(store) => Some(store),
            Self::Memory(_) => None,
        }
    }

    pub fn tool_pin(&self, server: &str, tool: &str) -> Result<Option<ToolPin>, StoreError> {
        match self {
            Self::Store(store) => store.tool_pin(server, tool),
            Self::Memory(m) => Ok(lock(m).pins.get(&key(server, tool)).cloned()),
        }
    }

    pub fn pin_tool(&self, server: &str, tool: &str, pin: &ToolPin) -> Result<(), StoreError> {
        match self {
            Self::Store(store) => store.pin_tool(server, tool, pin),
            Self::Memory(m) => {
                lock(m).pins.insert(key(server, tool), pin.clone());
                Ok(())
            }
        }
    }

    pub fn set_pending(&self, server: &str, tool: &str, seen: &ToolPin) -> Result<(), StoreError> {
        match self {
            Self::Store(store) => store.set_pending(server, tool, seen),
            // Nobody can trust a change kept only in this process's memory.
            Self::Memory(_) => Ok(()),
        }
    }

    pub fn trust_pending(
        &self,
        server: &str,
        tool: &str,
        by: &str,
    ) -> Result<Option<ToolPin>, StoreError> {
        match self {
            Self::Store(store) => store.trust_pending(server, tool, by),
            Self::Memory(_) => Ok(None),
        }
    }

    pub fn approval(&self, server: &str, tool: &str) -> Result<Option<Approval>, StoreError> {
        match self {
            Self::Store(store) => store.approval(server, tool),
            Self::Memory(m) => Ok(lock(m).approvals.get(&key(server, tool)).cloned()),
        }
    }

    pub fn approve(&self, server: &str, tool: &str, approval: &Approval) -> Result<(), StoreError> {
        match self {
            Self::Store(store) => store.approve(server, tool, approval),
            Self::Memory(m) => {
                lock(m)
                    .approvals
                    .insert(key(server, tool), approval.clone());
                Ok(())
            }
        }
    }
}
