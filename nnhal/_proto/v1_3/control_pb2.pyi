from nnhal._proto.v1_3 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListDevicesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeviceInfo(_message.Message):
    __slots__ = ("name", "versionString", "type", "description", "profileSource")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSIONSTRING_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROFILESOURCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    versionString: str
    type: _types_pb2.DeviceType
    description: str
    profileSource: str
    def __init__(self, name: _Optional[str] = ..., versionString: _Optional[str] = ..., type: _Optional[_Union[_types_pb2.DeviceType, str]] = ..., description: _Optional[str] = ..., profileSource: _Optional[str] = ...) -> None: ...

class ListDevicesReply(_message.Message):
    __slots__ = ("devices",)
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    devices: _containers.RepeatedCompositeFieldContainer[DeviceInfo]
    def __init__(self, devices: _Optional[_Iterable[_Union[DeviceInfo, _Mapping]]] = ...) -> None: ...

class SetFaultsRequest(_message.Message):
    __slots__ = ("device", "toml")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    TOML_FIELD_NUMBER: _ClassVar[int]
    device: str
    toml: str
    def __init__(self, device: _Optional[str] = ..., toml: _Optional[str] = ...) -> None: ...

class SetOfflineRequest(_message.Message):
    __slots__ = ("device", "offline")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_FIELD_NUMBER: _ClassVar[int]
    device: str
    offline: bool
    def __init__(self, device: _Optional[str] = ..., offline: _Optional[bool] = ...) -> None: ...

class GetTraceRequest(_message.Message):
    __slots__ = ("device", "clear")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    CLEAR_FIELD_NUMBER: _ClassVar[int]
    device: str
    clear: bool
    def __init__(self, device: _Optional[str] = ..., clear: _Optional[bool] = ...) -> None: ...

class ControlReply(_message.Message):
    __slots__ = ("status", "message", "json")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    status: _types_pb2.ErrorStatus
    message: str
    json: str
    def __init__(self, status: _Optional[_Union[_types_pb2.ErrorStatus, str]] = ..., message: _Optional[str] = ..., json: _Optional[str] = ...) -> None: ...

class KeepAliveRequest(_message.Message):
    __slots__ = ("session", "leaseMillis")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    LEASEMILLIS_FIELD_NUMBER: _ClassVar[int]
    session: str
    leaseMillis: int
    def __init__(self, session: _Optional[str] = ..., leaseMillis: _Optional[int] = ...) -> None: ...

class KeepAliveReply(_message.Message):
    __slots__ = ("status", "message", "leaseMillis")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEASEMILLIS_FIELD_NUMBER: _ClassVar[int]
    status: _types_pb2.ErrorStatus
    message: str
    leaseMillis: int
    def __init__(self, status: _Optional[_Union[_types_pb2.ErrorStatus, str]] = ..., message: _Optional[str] = ..., leaseMillis: _Optional[int] = ...) -> None: ...

class EndSessionRequest(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: str
    def __init__(self, session: _Optional[str] = ...) -> None: ...

class ResourceUsageRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
