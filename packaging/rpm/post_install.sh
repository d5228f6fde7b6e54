# agentsh (rpm): the group of agentshd's administrators, then the service enabled and, where
# systemd runs, started ($1 is 1 on a first install).
getent group agentsh >/dev/null || groupadd --system agentsh
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
if [ "$1" -eq 1 ]; then
    systemctl enable agentshd.service >/dev/null 2>&1 || :
    if [ -d /run/systemd/system ]; then
        systemctl start agentshd.service >/dev/null 2>&1 || :
    fi
fi
