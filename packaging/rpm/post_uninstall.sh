# agentsh (rpm): removed for good, the pinned kernel programs go with the daemon (nothing is
# left to answer the sessions they redirect). The state in /var/lib/agentsh stays, as rpm
# leaves data behind.
if [ "$1" -eq 0 ]; then
    rm -rf /sys/fs/bpf/agentsh
fi
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
