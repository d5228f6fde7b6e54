# agentsh (rpm): on removal ($1 is 0; not on upgrade), the service stops and is disabled.
if [ "$1" -eq 0 ]; then
    systemctl disable --now agentshd.service >/dev/null 2>&1 || :
fi
